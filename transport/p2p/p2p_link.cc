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

void P2pLink::QueueAnswer(P2pFrameType type, uint64_t seq, const std::string& text) {
  P2pFrame frame;
  frame.type = type;
  frame.seq = seq;
  frame.bytes = text.size();
  P2pOutChunk chunk;
  chunk.header = EncodeP2pFrame(frame);
  chunk.owned.assign(text.begin(), text.end());
  chunk.payload_bytes = text.size();
  Queue(std::move(chunk));
}

void P2pLink::Kill(const Status& why) {
  if (!dead_.ok()) return;
  dead_ = why;
  ::shutdown(fd_.get(), SHUT_RDWR);
}

Status P2pLink::Flush(std::vector<std::shared_ptr<P2pRequest>>* finished) {
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
  for (P2pOutChunk& chunk : out_) {
    if (chunk.owner.get() != owner) continue;
    if (chunk.owned.empty() && chunk.payload_bytes > 0) {
      chunk.owned.assign(chunk.payload, chunk.payload + chunk.payload_bytes);
    }
    chunk.owner.reset();
    chunk.completes_owner = false;
  }
}

StatusOr<bool> P2pLink::ReadPhase() {
  constexpr size_t kAhead = 64 << 10;
  for (;;) {
    uint8_t* into = nullptr;  // null: the bytes are discarded
    uint64_t want = 0;
    if (in_.phase == P2pInbound::Phase::kHeader) {
      into = in_.header.data() + in_.header_got;
      want = kP2pHeaderBytes - in_.header_got;
    } else {
      want = P2pPayloadBytes(in_.frame) - in_.payload_got;
      if (!in_.discard) into = in_.target + in_.payload_got;
    }
    if (want == 0) return true;
    uint64_t got = 0;
    if (ahead_begin_ < ahead_end_) {  // what was read ahead first
      got = std::min<uint64_t>(want, ahead_end_ - ahead_begin_);
      if (into != nullptr) std::memcpy(into, ahead_.data() + ahead_begin_, got);
      ahead_begin_ += got;
    } else {
      if (drained_) return false;
      const bool direct = into != nullptr && want >= kAhead;
      if (!direct && ahead_.size() < kAhead) ahead_.resize(kAhead);
      const uint64_t asked = direct ? want : kAhead;
      const IoResult io = RecvSome(fd_.get(), direct ? into : ahead_.data(), asked);
      if (io.would_block()) {
        drained_ = true;
        return false;
      }
      if (io.eof || io.error != 0) {
        Kill(io.eof ? LinkError(peer_, "closed")
                    : LinkError(peer_, std::string("failed: ") + std::strerror(io.error)));
        return dead_;
      }
      drained_ = io.bytes < asked;
      if (direct) {
        got = io.bytes;
      } else {
        ahead_begin_ = 0;
        ahead_end_ = io.bytes;
        continue;
      }
    }
    if (in_.phase == P2pInbound::Phase::kHeader) {
      in_.header_got += got;
    } else {
      in_.payload_got += got;
    }
  }
}

}  // namespace kolo::transport
