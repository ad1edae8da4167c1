#include "transport/p2p/p2p_link.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/socket_io.h"

namespace kolo::transport {
namespace {

// One sendmsg() of `chunk`'s unsent header and payload; bytes written, 0 on would-block, or
// -errno.
int64_t WriteChunk(int fd, const P2pOutChunk& chunk) {
  iovec iov[2];
  int count = 0;
  const uint64_t total = kP2pHeaderBytes + chunk.payload_bytes;
  uint64_t at = chunk.sent;
  if (at < kP2pHeaderBytes) {
    iov[count++] = {const_cast<uint8_t*>(chunk.header.data()) + at, kP2pHeaderBytes - at};
    at = kP2pHeaderBytes;
  }
  const uint8_t* payload = chunk.owned.empty() ? chunk.payload : chunk.owned.data();
  if (at < total) {
    iov[count++] = {const_cast<uint8_t*>(payload) + (at - kP2pHeaderBytes), total - at};
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = count;
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

Status LinkError(int peer, const std::string& what) {
  return Unavailable("rank " + std::to_string(peer) + "'s point-to-point connection " + what +
                     " (the rank exited, shut down or lost its host)");
}

}  // namespace

void P2pLink::QueueAnswer(P2pFrameType type, uint64_t seq, const std::string& text, uint8_t code) {
  P2pFrame frame;
  frame.type = type;
  frame.dtype = code;
  frame.seq = seq;
  frame.bytes = text.size();
  P2pOutChunk chunk;
  chunk.header = EncodeP2pFrame(frame);
  chunk.owned.assign(text.begin(), text.end());
  chunk.payload_bytes = text.size();
  Queue(std::move(chunk));
}

void P2pLink::Queue(P2pOutChunk chunk) {
  if (ring_ && P2pHeaderType(chunk.header) != P2pFrameType::kData) {
    ring_out_.push_back(std::move(chunk));
  } else {
    out_.push_back(std::move(chunk));
  }
}

void P2pLink::QueueBell() {
  P2pFrame frame;
  frame.type = P2pFrameType::kBell;
  P2pOutChunk chunk;
  chunk.header = EncodeP2pFrame(frame);
  out_.push_back(std::move(chunk));
}

void P2pLink::FlushRing(bool ask_for_room) {
  bool wrote = false;
  while (!ring_out_.empty()) {
    P2pOutChunk& chunk = ring_out_.front();
    const uint64_t total = kP2pHeaderBytes + chunk.payload_bytes;
    if (chunk.sent < kP2pHeaderBytes) {
      const size_t n = ring_->Write(chunk.header.data() + chunk.sent, kP2pHeaderBytes - chunk.sent);
      chunk.sent += n;
      wrote = wrote || n > 0;
    }
    if (chunk.sent >= kP2pHeaderBytes && chunk.sent < total) {
      const uint8_t* payload = chunk.owned.empty() ? chunk.payload : chunk.owned.data();
      const size_t n = ring_->Write(payload + (chunk.sent - kP2pHeaderBytes), total - chunk.sent);
      chunk.sent += n;
      wrote = wrote || n > 0;
    }
    if (chunk.sent == total) {
      ring_out_.pop_front();
      continue;
    }
    // Full: publish what went in, then ask the reader to ring once it made room.
    if (wrote && ring_->Publish()) QueueBell();
    wrote = false;
    if (!ask_for_room || !ring_->AskForRoom()) return;
  }
  if (wrote && ring_->Publish()) QueueBell();
}

void P2pLink::Kill(const Status& why) {
  if (!dead_.ok()) return;
  dead_ = why;
  ::shutdown(fd_.get(), SHUT_RDWR);
}

Status P2pLink::Flush(std::vector<std::shared_ptr<P2pRequest>>* finished, bool ask_for_room) {
  if (alive() && ring_) FlushRing(ask_for_room);
  while (alive() && !out_.empty()) {
    P2pOutChunk& chunk = out_.front();
    const int64_t n = WriteChunk(fd_.get(), chunk);
    if (n < 0) {
      Kill(LinkError(peer_, std::string("failed: ") + std::strerror(static_cast<int>(-n))));
      return dead_;
    }
    if (n == 0) return Status::Ok();
    chunk.sent += static_cast<uint64_t>(n);
    if (chunk.sent < kP2pHeaderBytes + chunk.payload_bytes) return Status::Ok();
    if (chunk.completes_owner && chunk.owner) finished->push_back(std::move(chunk.owner));
    out_.pop_front();
  }
  return dead_;
}

void P2pLink::Detach(const P2pRequest* owner) {
  for (std::deque<P2pOutChunk>* queue : {&out_, &ring_out_}) {
    for (P2pOutChunk& chunk : *queue) {
      if (chunk.owner.get() != owner) continue;
      if (chunk.owned.empty() && chunk.payload_bytes > 0) {
        chunk.owned.assign(chunk.payload, chunk.payload + chunk.payload_bytes);
      }
      chunk.owner.reset();
      chunk.completes_owner = false;
    }
  }
}

IoResult P2pSocketReader::Read(int fd, uint8_t* into, uint64_t want) {
  constexpr size_t kAhead = 64 << 10;
  for (;;) {
    if (begin_ < end_) {  // what was read ahead first
      const uint64_t got = std::min<uint64_t>(want, end_ - begin_);
      if (into != nullptr) std::memcpy(into, ahead_.data() + begin_, got);
      begin_ += got;
      return {got, false, 0};
    }
    if (drained_) return {};
    const bool direct = into != nullptr && want >= kAhead;
    if (!direct && ahead_.size() < kAhead) ahead_.resize(kAhead);
    const uint64_t asked = direct ? want : kAhead;
    const IoResult io = RecvSome(fd, direct ? into : ahead_.data(), asked);
    if (io.would_block()) drained_ = true;
    if (io.would_block() || io.eof || io.error != 0) return io;
    drained_ = io.bytes < asked;
    if (direct) return io;
    begin_ = 0;
    end_ = io.bytes;
  }
}

StatusOr<bool> P2pLink::ReadPhase() {
  P2pInbound& in = in_[active_];
  const bool from_ring = active_ == static_cast<int>(P2pSource::kRing);
  for (;;) {
    uint8_t* into = nullptr;  // null: the bytes are discarded
    uint64_t want = 0;
    if (in.phase == P2pInbound::Phase::kHeader) {
      into = in.header.data() + in.header_got;
      want = kP2pHeaderBytes - in.header_got;
    } else {
      want = P2pPayloadBytes(in.frame) - in.payload_got;
      if (!in.discard) into = in.target + in.payload_got;
    }
    if (want == 0) return true;
    uint64_t got = 0;
    if (from_ring) {
      StatusOr<size_t> taken = ring_->Take(into, want);
      if (!taken.ok()) {
        Kill(Unavailable("rank " + std::to_string(peer_) +
                         "'s point-to-point connection failed: " + taken.status().message()));
        return dead_;
      }
      got = *taken;
    } else {
      const IoResult io = socket_reader_.Read(fd_.get(), into, want);
      if (io.eof || io.error != 0) {
        Kill(io.eof ? LinkError(peer_, peer_farewell.empty()
                                           ? "closed"
                                           : "closed, its rank saying: " + peer_farewell)
                    : LinkError(peer_, std::string("failed: ") + std::strerror(io.error)));
        return dead_;
      }
      got = io.bytes;
    }
    if (got == 0) return false;
    if (in.phase == P2pInbound::Phase::kHeader) {
      in.header_got += got;
    } else {
      in.payload_got += got;
    }
  }
}

void P2pLink::AfterRingRead() {
  if (ring_->WriterWaited()) QueueBell();
}

}  // namespace kolo::transport
