#include "transport/tcp/tcp_round_lane.h"

#include <algorithm>
#include <cerrno>

#include "core/errno_status.h"
#include "transport/tcp/tcp_socket.h"

namespace kolo::transport {

TcpRoundLane::TcpRoundLane(int rank, std::vector<UniqueFd> connections, Logger logger)
    : rank_(rank),
      connections_(std::move(connections)),
      logger_(std::move(logger)),
      parsers_(connections_.size()),
      out_(connections_.size()),
      closed_(connections_.size(), false) {
  for (const UniqueFd& fd : connections_) {
    if (fd.valid()) open_fds_.push_back(fd.get());
  }
}

Status TcpRoundLane::SendToAll(const RoundMessage& message) {
  const std::string bytes = EncodeRoundMessage(message);
  for (size_t r = 0; r < connections_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || closed_[r]) continue;
    out_[r] += bytes;
    Flush(r);
  }
  return Status::Ok();
}

void TcpRoundLane::Flush(size_t peer) {
  size_t sent = 0;
  while (sent < out_[peer].size()) {
    IoResult io =
        SendSome(connections_[peer].get(), out_[peer].data() + sent, out_[peer].size() - sent);
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
  logger_->debug("fast path: rank {} closed its round connection{}", peer,
                 why.empty() ? std::string() : " (" + why + ")");
  closed_[peer] = true;
  out_[peer].clear();
  newly_closed_.push_back(static_cast<int>(peer));
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), connections_[peer].get()),
                  open_fds_.end());
}

Status TcpRoundLane::Poll(std::vector<std::pair<int, RoundMessage>>* out,
                          std::vector<int>* closed) {
  char buffer[4096];
  for (size_t r = 0; r < connections_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || closed_[r]) continue;
    if (!out_[r].empty()) Flush(r);
    while (!closed_[r]) {
      IoResult io = RecvSome(connections_[r].get(), buffer, sizeof(buffer));
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
  closed->insert(closed->end(), newly_closed_.begin(), newly_closed_.end());
  newly_closed_.clear();
  return Status::Ok();
}

}  // namespace kolo::transport
