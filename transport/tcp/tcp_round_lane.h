// TcpRoundLane: the fast path's RoundLane (core/round_lane.h) over the data mesh's round
// connections (TcpMesh::TakeRoundConnections), one authenticated TCP connection per peer.
// Wire format: transport/round_codec.h.
//
// Threading: background thread only (see RoundLane).
#pragma once

#include <string>
#include <vector>

#include "core/logging.h"
#include "core/round_lane.h"
#include "transport/round_codec.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

class TcpRoundLane final : public RoundLane {
 public:
  // `connections` by rank, invalid at `rank`'s own index (TcpMesh::TakeRoundConnections).
  TcpRoundLane(int rank, std::vector<UniqueFd> connections, Logger logger);

  Status SendToAll(const RoundMessage& message) override;
  Status Poll(std::vector<std::pair<int, RoundMessage>>* out, std::vector<int>* closed) override;
  std::vector<int> fds() const override { return open_fds_; }

 private:
  // Constant after construction.
  const int rank_;
  const std::vector<UniqueFd> connections_;
  const Logger logger_;

  // Sends what the peer's socket takes of out_[peer] now; a failure closes the peer.
  void Flush(size_t peer);
  void Close(size_t peer, const std::string& why);

  std::vector<RoundStreamParser> parsers_;  // by rank
  std::vector<std::string> out_;            // by rank: bytes not sent yet
  std::vector<bool> closed_;                // by rank: EOF or an error was seen
  std::vector<int> newly_closed_;           // not reported by Poll yet
  std::vector<int> open_fds_;               // the connections not closed yet
};

}  // namespace kolo::transport
