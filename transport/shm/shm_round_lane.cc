#include "transport/shm/shm_round_lane.h"

#include "core/errno_status.h"
#include "transport/socket_io.h"

namespace kolo::transport {

ShmRoundLane::ShmRoundLane(int rank, std::vector<UniqueFd> connections, ShmRoundArea area,
                           Logger logger)
    : area_(area),
      logger_(logger),
      peers_(rank, std::move(connections), std::move(logger)),
      parsers_(peers_.size()),
      out_(peers_.size()),
      tails_(peers_.size(), 0),
      seen_heads_(peers_.size(), 0),
      heads_(peers_.size(), 0),
      bells_sent_(peers_.size(), 0),
      bells_read_(peers_.size(), 0) {}

Status ShmRoundLane::SendToAll(const RoundMessage& message) {
  const std::string bytes = EncodeRoundMessage(message);
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (!peers_.open(r)) continue;
    out_[r] += bytes;
    Push(r);
  }
  return Status::Ok();
}

Status ShmRoundLane::SendTo(int peer, const RoundMessage& message) {
  KOLO_RETURN_IF_ERROR(peers_.CheckTarget(peer));
  if (!peers_.open(peer)) return Status::Ok();
  out_[peer] += EncodeRoundMessage(message);
  Push(peer);
  return Status::Ok();
}

void ShmRoundLane::Push(size_t peer) {
  ShmRoundRing* ring = area_.ring(peers_.rank(), static_cast<int>(peer));
  std::string& pending = out_[peer];
  size_t sent = RingWrite(ring, &tails_[peer], pending.data(), pending.size(), &seen_heads_[peer]);
  if (sent < pending.size()) {
    // Full: ask to be rung once the peer has made room, then look once more (it may just have).
    __atomic_store_n(&ring->sender_waits, 1, __ATOMIC_SEQ_CST);
    sent += RingWrite(ring, &tails_[peer], pending.data() + sent, pending.size() - sent,
                      &seen_heads_[peer]);
  }
  pending.erase(0, sent);
  // After the tail's store: either the peer's Arm() sees the bytes or we see it armed (and
  // only one of the senders that do rings it). Loaded before it is exchanged: the word's line
  // is one the peer reads on every poll, and an exchange would take it from the peer's cache
  // each message, so that the peer's next poll waits for it to come back just when the
  // message is there to read.
  uint32_t* armed = &area_.inbox(static_cast<int>(peer))->armed;
  if (sent > 0 && __atomic_load_n(armed, __ATOMIC_SEQ_CST) != 0 &&
      __atomic_exchange_n(armed, 0, __ATOMIC_SEQ_CST) != 0) {
    Ring(peer);
  }
}

void ShmRoundLane::Ring(size_t peer) {
  // Counted first: a peer that sees the count before the byte reads its connection again.
  __atomic_store_n(&area_.ring(peers_.rank(), static_cast<int>(peer))->bells, ++bells_sent_[peer],
                   __ATOMIC_RELEASE);
  const char bell = 'b';
  // A full socket already holds doorbells the peer has not read: one more adds nothing.
  IoResult io = SendSome(peers_.fd(peer), &bell, 1);
  if (io.error != 0) Close(peer, ErrnoText(io.error));
}

bool ShmRoundLane::Arm() {
  ShmRoundInbox* inbox = area_.inbox(peers_.rank());
  __atomic_store_n(&inbox->armed, 1, __ATOMIC_SEQ_CST);
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (!peers_.open(r)) continue;
    if (RingHasData(area_.ring(static_cast<int>(r), peers_.rank()), heads_[r])) {
      __atomic_store_n(&inbox->armed, 0, __ATOMIC_RELAXED);
      return false;
    }
  }
  return true;
}

uint64_t ShmRoundLane::BellsFrom(size_t peer) const {
  return __atomic_load_n(&area_.ring(static_cast<int>(peer), peers_.rank())->bells,
                         __ATOMIC_ACQUIRE);
}

void ShmRoundLane::DrainConnection(size_t peer, bool* ended) {
  char buffer[256];
  while (true) {
    IoResult io = RecvSome(peers_.fd(peer), buffer, sizeof(buffer));
    if (io.would_block()) return;
    if (io.eof || io.error != 0) {
      *ended = true;
      if (io.error != 0) logger_->debug("fast path: rank {}: {}", peer, ErrnoText(io.error));
      return;
    }
    bells_read_[peer] += io.bytes;
    if (io.bytes < sizeof(buffer)) return;
  }
}

Status ShmRoundLane::ReadRing(size_t peer, std::vector<std::pair<int, RoundMessage>>* out) {
  ShmRoundRing* ring = area_.ring(static_cast<int>(peer), peers_.rank());
  char buffer[kShmRoundRingBytes];
  bool took = false;
  while (true) {
    StatusOr<size_t> n = RingRead(ring, &heads_[peer], buffer, sizeof(buffer));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    took = true;
    KOLO_RETURN_IF_ERROR(parsers_[peer].Feed(buffer, *n));
  }
  taken_.clear();  // its buffer reused from poll to poll: this runs for every round message
  parsers_[peer].Take(&taken_);
  for (RoundMessage& m : taken_) out->emplace_back(static_cast<int>(peer), std::move(m));
  if (took && __atomic_load_n(&ring->sender_waits, __ATOMIC_SEQ_CST) != 0 &&
      __atomic_exchange_n(&ring->sender_waits, 0, __ATOMIC_SEQ_CST) != 0) {
    Ring(peer);  // room for the rest of its message
  }
  return Status::Ok();
}

void ShmRoundLane::Close(size_t peer, const std::string& why) {
  peers_.Close(peer, why);
  out_[peer].clear();
}

Status ShmRoundLane::Poll(std::vector<std::pair<int, RoundMessage>>* out,
                          std::vector<int>* closed) {
  // This thread is awake and reading: senders need not ring it until it arms again. (Stored
  // only when set: the word's cache line is the senders' too.)
  uint32_t* armed = &area_.inbox(peers_.rank())->armed;
  if (__atomic_load_n(armed, __ATOMIC_RELAXED) != 0) __atomic_store_n(armed, 0, __ATOMIC_RELAXED);
  // A wait that returned for a doorbell: the peers whose count moved rang it, and only their
  // connections are read (one recv each, not one per peer: at 16 ranks a wake read ~7 empty
  // sockets). A wait that returned with no count moved was for something else, a closed
  // connection among it: all are read. A close that came with a doorbell stays readable, so
  // the next wait returns at once and finds it; so does the periodic check.
  bool rung = false;
  if (woken_) {
    for (size_t r = 0; r < peers_.size() && !rung; ++r) {
      rung = peers_.open(r) && BellsFrom(r) != bells_read_[r];
    }
  }
  const bool check_connections = (woken_ && !rung) || ++polls_ % kConnectionCheckPolls == 0;
  woken_ = false;
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (!peers_.open(r)) continue;
    if (!out_[r].empty()) Push(r);
    bool ended = false;
    // Before the ring: what the peer wrote before it closed is in the ring by then.
    if (check_connections || BellsFrom(r) != bells_read_[r]) DrainConnection(r, &ended);
    Status read = ReadRing(r, out);
    if (!read.ok()) return read.WithContext("fast path: from rank " + std::to_string(r));
    if (ended) Close(r, std::string());
  }
  peers_.TakeClosed(closed);
  return Status::Ok();
}

}  // namespace kolo::transport
