#include "transport/shm/shm_round_lane.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "core/errno_status.h"

namespace kolo::transport {
namespace {

// How often a polling loop reads the connections (a peer's exit, a doorbell) at least.
constexpr std::chrono::milliseconds kConnectionCheck{1};

}  // namespace

ShmRoundLane::ShmRoundLane(int rank, std::vector<UniqueFd> connections, ShmRoundArea area,
                           Logger logger)
    : rank_(rank),
      connections_(std::move(connections)),
      area_(area),
      logger_(std::move(logger)),
      parsers_(connections_.size()),
      out_(connections_.size()),
      tails_(connections_.size(), 0),
      heads_(connections_.size(), 0),
      closed_(connections_.size(), false) {
  for (const UniqueFd& fd : connections_) {
    if (fd.valid()) open_fds_.push_back(fd.get());
  }
}

Status ShmRoundLane::SendToAll(const RoundMessage& message) {
  const std::string bytes = EncodeRoundMessage(message);
  for (size_t r = 0; r < connections_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || closed_[r]) continue;
    out_[r] += bytes;
    Flush(r);
  }
  return Status::Ok();
}

void ShmRoundLane::Flush(size_t peer) {
  ShmRoundRing* ring = area_.ring(rank_, static_cast<int>(peer));
  std::string& pending = out_[peer];
  size_t sent = RingWrite(ring, &tails_[peer], pending.data(), pending.size());
  if (sent < pending.size()) {
    // Full: ask to be rung once the peer has made room, then look once more (it may just have).
    __atomic_store_n(&ring->sender_waits, 1, __ATOMIC_SEQ_CST);
    sent += RingWrite(ring, &tails_[peer], pending.data() + sent, pending.size() - sent);
  }
  pending.erase(0, sent);
  if (sent > 0 &&
      __atomic_exchange_n(&area_.inbox(static_cast<int>(peer))->armed, 0, __ATOMIC_SEQ_CST) != 0) {
    Ring(peer);
  }
}

void ShmRoundLane::Ring(size_t peer) {
  const char bell = 'b';
  ssize_t n = 0;
  do {
    n = ::send(connections_[peer].get(), &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  // A full socket already holds doorbells the peer has not read: one more adds nothing.
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) Close(peer, ErrnoText(errno));
}

bool ShmRoundLane::Arm() {
  ShmRoundInbox* inbox = area_.inbox(rank_);
  __atomic_store_n(&inbox->armed, 1, __ATOMIC_SEQ_CST);
  for (size_t r = 0; r < connections_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || closed_[r]) continue;
    if (RingHasData(area_.ring(static_cast<int>(r), rank_), heads_[r])) {
      __atomic_store_n(&inbox->armed, 0, __ATOMIC_RELAXED);
      return false;
    }
  }
  armed_ = true;
  return true;
}

void ShmRoundLane::DrainConnection(size_t peer, bool* ended) {
  char buffer[256];
  while (true) {
    const ssize_t n = ::recv(connections_[peer].get(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      *ended = true;
      if (n < 0) logger_->debug("fast path: rank {}: {}", peer, ErrnoText(errno));
      return;
    }
    if (static_cast<size_t>(n) < sizeof(buffer)) return;
  }
}

Status ShmRoundLane::ReadRing(size_t peer, std::vector<std::pair<int, RoundMessage>>* out) {
  ShmRoundRing* ring = area_.ring(static_cast<int>(peer), rank_);
  char buffer[kShmRoundRingBytes];
  bool took = false;
  while (true) {
    StatusOr<size_t> n = RingRead(ring, &heads_[peer], buffer, sizeof(buffer));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    took = true;
    KOLO_RETURN_IF_ERROR(parsers_[peer].Feed(buffer, *n));
  }
  std::vector<RoundMessage> messages;
  parsers_[peer].Take(&messages);
  for (RoundMessage& m : messages) out->emplace_back(static_cast<int>(peer), std::move(m));
  if (took && __atomic_load_n(&ring->sender_waits, __ATOMIC_SEQ_CST) != 0 &&
      __atomic_exchange_n(&ring->sender_waits, 0, __ATOMIC_SEQ_CST) != 0) {
    Ring(peer);
  }
  return Status::Ok();
}

void ShmRoundLane::Close(size_t peer, const std::string& why) {
  if (closed_[peer]) return;
  logger_->debug("fast path: rank {} closed its round connection{}", peer,
                 why.empty() ? std::string() : " (" + why + ")");
  closed_[peer] = true;
  out_[peer].clear();
  newly_closed_.push_back(static_cast<int>(peer));
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), connections_[peer].get()),
                  open_fds_.end());
}

Status ShmRoundLane::Poll(std::vector<std::pair<int, RoundMessage>>* out,
                          std::vector<int>* closed) {
  // This thread is awake and reading: senders need not ring it until it arms again.
  __atomic_store_n(&area_.inbox(rank_)->armed, 0, __ATOMIC_RELAXED);
  bool read_connections = armed_;
  armed_ = false;
  const auto now = std::chrono::steady_clock::now();
  if (now - connections_read_ >= kConnectionCheck) read_connections = true;
  if (read_connections) connections_read_ = now;
  for (size_t r = 0; r < connections_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || closed_[r]) continue;
    if (!out_[r].empty()) Flush(r);
    bool ended = false;
    // First: what the peer wrote before it closed is in the ring by then.
    if (read_connections) DrainConnection(r, &ended);
    Status read = ReadRing(r, out);
    if (!read.ok()) return read.WithContext("fast path: from rank " + std::to_string(r));
    if (ended) Close(r, std::string());
  }
  closed->insert(closed->end(), newly_closed_.begin(), newly_closed_.end());
  newly_closed_.clear();
  return Status::Ok();
}

}  // namespace kolo::transport
