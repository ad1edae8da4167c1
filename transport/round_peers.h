// RoundPeers: what both round lanes (transport/tcp/tcp_round_lane.h,
// transport/shm/shm_round_lane.h) keep per peer about the mesh's round connections: the
// connections by rank, which of them have closed, the closes not reported by Poll yet, and the
// descriptors still open (the lane's fds()).
//
// Threading: one owner, the lane's thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/logging.h"
#include "kolo/status.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

class RoundPeers {
 public:
  // `connections` by rank, invalid at `rank`'s own index and at the ranks this one exchanges
  // no round messages with (TcpMesh::TakeRoundConnections; core/round_lane.h, RoundPeersOf).
  RoundPeers(int rank, std::vector<UniqueFd> connections, Logger logger);

  int rank() const { return rank_; }
  // Ranks in the job (this one included).
  size_t size() const { return connections_.size(); }
  // Whether `peer` is a rank with a round connection that has not closed.
  bool open(size_t peer) const { return connections_[peer].valid() && !closed_[peer]; }
  // OK if `peer` is a rank with a round connection (open or closed); else Internal, naming it:
  // a round pattern sent to a rank it has no connection to.
  Status CheckTarget(int peer) const;
  int fd(size_t peer) const { return connections_[peer].get(); }
  const std::vector<int>& open_fds() const { return open_fds_; }

  // Marks `peer` closed (once; later calls do nothing), `why` logged at debug level.
  void Close(size_t peer, const std::string& why);
  // Moves the closes not reported yet to the end of `closed`.
  void TakeClosed(std::vector<int>* closed);

 private:
  // Constant after construction.
  const int rank_;
  const std::vector<UniqueFd> connections_;
  const Logger logger_;

  std::vector<bool> closed_;       // by rank: EOF or an error was seen
  std::vector<int> newly_closed_;  // not reported yet
  std::vector<int> open_fds_;      // the connections not closed yet
};

}  // namespace kolo::transport
