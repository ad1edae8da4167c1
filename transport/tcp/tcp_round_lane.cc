#include "transport/tcp/tcp_round_lane.h"

#include <poll.h>

#include <cerrno>
#include <string>

#include "core/errno_status.h"
#include "transport/tcp/tcp_socket.h"

namespace kolo::transport {

TcpRoundLane::TcpRoundLane(int rank, std::vector<UniqueFd> connections, Logger logger)
    : peers_(rank, std::move(connections), std::move(logger)),
      parsers_(peers_.size()),
      out_(peers_.size()) {}

Status TcpRoundLane::SendToAll(const RoundMessage& message) {
  // Encoded once, straight into the first open peer's pending bytes (no temporary: a message
  // with eager inputs is kilobytes), and copied from there to the others'.
  size_t first = peers_.size();
  size_t start = 0;
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (!peers_.open(r)) continue;
    if (first == peers_.size()) {
      first = r;
      start = out_[r].size();
      EncodeRoundMessage(message, &out_[r]);
    } else {
      out_[r].append(out_[first], start, std::string::npos);
    }
  }
  for (size_t r = first; r < peers_.size(); ++r) {
    if (peers_.open(r)) Flush(r);
  }
  return Status::Ok();
}

Status TcpRoundLane::SendTo(int peer, const RoundMessage& message) {
  KOLO_RETURN_IF_ERROR(peers_.CheckTarget(peer));
  if (!peers_.open(peer)) return Status::Ok();
  EncodeRoundMessage(message, &out_[peer]);
  Flush(peer);
  return Status::Ok();
}

void TcpRoundLane::Flush(size_t peer) {
  size_t sent = 0;
  while (sent < out_[peer].size()) {
    IoResult io = SendSome(peers_.fd(peer), out_[peer].data() + sent, out_[peer].size() - sent);
    if (io.error != 0) {
      Close(peer, ErrnoText(io.error));
      return;
    }
    if (io.would_block()) break;  // the rest goes with a later Poll or SendToAll
    sent += io.bytes;
  }
  out_[peer].erase(0, sent);
}

void TcpRoundLane::Close(size_t peer, const std::string& why) {
  peers_.Close(peer, why);
  out_[peer].clear();
}

Status TcpRoundLane::Poll(std::vector<std::pair<int, RoundMessage>>* out,
                          std::vector<int>* closed) {
  // One poll() says which sockets have bytes (or an end) for us: the loop looks for round
  // messages many times a round, most often finding none, and a recv() per peer each time is
  // what filled oversubscribed cores with system calls (docs/PERFORMANCE.md, "Round messages
  // over TCP").
  ready_.clear();
  ready_peer_.clear();
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (!peers_.open(r)) continue;
    if (!out_[r].empty()) Flush(r);
    if (!peers_.open(r)) continue;
    ready_.push_back({peers_.fd(r), POLLIN, 0});
    ready_peer_.push_back(r);
  }
  if (!ready_.empty() && poll(ready_.data(), ready_.size(), 0) < 0 && errno != EINTR) {
    return ErrnoToStatus(errno, "fast path: poll() on the round connections");
  }
  char buffer[4096];
  for (size_t i = 0; i < ready_.size(); ++i) {
    if (ready_[i].revents == 0) continue;
    const size_t r = ready_peer_[i];
    while (peers_.open(r)) {
      IoResult io = RecvSome(peers_.fd(r), buffer, sizeof(buffer));
      if (io.would_block()) break;
      if (io.eof || io.error != 0) {
        Close(r, io.error != 0 ? ErrnoText(io.error) : std::string());
        break;
      }
      Status fed = parsers_[r].Feed(buffer, io.bytes);
      if (!fed.ok()) return fed.WithContext("fast path: from rank " + std::to_string(r));
      std::vector<RoundMessage> messages;
      parsers_[r].Take(&messages);
      for (RoundMessage& m : messages) out->emplace_back(static_cast<int>(r), std::move(m));
      if (io.bytes < sizeof(buffer)) break;
    }
  }
  peers_.TakeClosed(closed);
  return Status::Ok();
}

}  // namespace kolo::transport
