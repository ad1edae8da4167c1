// TcpRoundLane: the fast path's RoundLane (core/round_lane.h) over the data mesh's round
// connections (TcpMesh::TakeRoundConnections), one authenticated TCP connection per peer.
// Wire format: transport/round_codec.h.
//
// Threading: the loop's thread only (see RoundLane).
#pragma once

#include <poll.h>

#include <string>
#include <vector>

#include "core/logging.h"
#include "core/round_lane.h"
#include "transport/round_codec.h"
#include "transport/round_peers.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

class TcpRoundLane final : public RoundLane {
 public:
  // `connections` by rank, invalid at `rank`'s own index (TcpMesh::TakeRoundConnections).
  TcpRoundLane(int rank, std::vector<UniqueFd> connections, Logger logger);

  Status SendToAll(const RoundMessage& message) override;
  Status SendTo(int peer, const RoundMessage& message) override;
  Status Poll(std::vector<std::pair<int, RoundMessage>>* out, std::vector<int>* closed) override;
  std::vector<int> fds() const override { return peers_.open_fds(); }

 private:
  // Sends what the peer's socket takes of out_[peer] now; a failure closes the peer.
  void Flush(size_t peer);
  void Close(size_t peer, const std::string& why);

  RoundPeers peers_;
  std::vector<RoundStreamParser> parsers_;  // by rank
  std::vector<std::string> out_;            // by rank: bytes not sent yet
  // Poll's scratch: the open connections and their ranks.
  std::vector<pollfd> ready_;
  std::vector<size_t> ready_peer_;
};

}  // namespace kolo::transport
