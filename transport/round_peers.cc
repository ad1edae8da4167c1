#include "transport/round_peers.h"

#include <algorithm>
#include <string>

namespace kolo::transport {

RoundPeers::RoundPeers(int rank, std::vector<UniqueFd> connections, Logger logger)
    : rank_(rank),
      connections_(std::move(connections)),
      logger_(std::move(logger)),
      closed_(connections_.size(), false) {
  for (const UniqueFd& fd : connections_) {
    if (fd.valid()) open_fds_.push_back(fd.get());
  }
}

Status RoundPeers::CheckTarget(int peer) const {
  if (peer >= 0 && static_cast<size_t>(peer) < connections_.size() && connections_[peer].valid()) {
    return Status::Ok();
  }
  return Internal("fast path: rank " + std::to_string(rank_) + " has no round connection to rank " +
                  std::to_string(peer));
}

void RoundPeers::Close(size_t peer, const std::string& why) {
  if (closed_[peer]) return;
  logger_->debug("fast path: rank {} closed its round connection{}", peer,
                 why.empty() ? std::string() : " (" + why + ")");
  closed_[peer] = true;
  newly_closed_.push_back(static_cast<int>(peer));
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), connections_[peer].get()),
                  open_fds_.end());
}

void RoundPeers::TakeClosed(std::vector<int>* closed) {
  closed->insert(closed->end(), newly_closed_.begin(), newly_closed_.end());
  newly_closed_.clear();
}

}  // namespace kolo::transport
