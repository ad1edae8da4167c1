// ShmRoundLane: the fast path's RoundLane (core/round_lane.h) for a job whose ranks share one
// host and a ShmMesh segment. Round messages travel through the segment's round rings
// (transport/shm/shm_round_ring.h) instead of loopback TCP: a send is a copy and a store, a
// poll a load, no system call. The round TCP connections stay, for two things only:
//   - a doorbell: a sender writes one byte to a peer whose loop thread said it may sleep
//     (Arm), so that thread's wait on fds() still returns for a round message;
//   - the peers' lives: a peer that exits closes its connection, which Poll reports as closed
//     once the ring's last bytes from it have been delivered (a connection is read when its
//     peer counts a doorbell not yet read, all of them after a wait on fds() returned with no
//     doorbell counted, and every kConnectionCheckPolls polls).
// The bytes in the rings are the TCP lane's wire format (transport/round_codec.h) and pass
// the same parser, so a peer that writes anything else is a protocol error naming it.
//
// Threading: the loop's thread only (see RoundLane); the segment must outlive the lane.
#pragma once

#include <string>
#include <vector>

#include "core/logging.h"
#include "core/round_lane.h"
#include "transport/round_codec.h"
#include "transport/round_peers.h"
#include "transport/shm/shm_round_ring.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

class ShmRoundLane final : public RoundLane {
 public:
  // Polls between two reads of the connections when nothing says a byte is there.
  static constexpr unsigned kConnectionCheckPolls = 64;

  // `connections` by rank, invalid at `rank`'s own index (TcpMesh::TakeRoundConnections);
  // `area`: the round area of the job's segment (ShmMesh::round_area()), zero-filled when
  // the job started.
  ShmRoundLane(int rank, std::vector<UniqueFd> connections, ShmRoundArea area, Logger logger);

  Status SendToAll(const RoundMessage& message) override;
  Status SendTo(int peer, const RoundMessage& message) override;
  Status Poll(std::vector<std::pair<int, RoundMessage>>* out, std::vector<int>* closed) override;
  std::vector<int> fds() const override { return peers_.open_fds(); }
  bool Arm() override;
  bool wakes_only_when_armed() const override { return true; }
  bool shared_memory() const override { return true; }
  void Woken() override { woken_ = true; }

 private:
  // Puts what peer's ring takes of out_[peer] in it; rings the peer if it sleeps.
  void Push(size_t peer);
  // Writes one doorbell byte to `peer`; a failure closes it.
  void Ring(size_t peer);
  // The doorbells `peer` says it wrote to this rank.
  uint64_t BellsFrom(size_t peer) const;
  // Reads the bytes waiting on peer's connection: doorbells (counted) or its end.
  void DrainConnection(size_t peer, bool* ended);
  Status ReadRing(size_t peer, std::vector<std::pair<int, RoundMessage>>* out);
  void Close(size_t peer, const std::string& why);

  // Constant after construction.
  const ShmRoundArea area_;
  const Logger logger_;

  RoundPeers peers_;
  std::vector<RoundStreamParser> parsers_;  // by rank
  std::vector<std::string> out_;            // by rank: bytes its ring could not take yet
  std::vector<uint64_t> tails_;             // by rank: bytes put in our ring to it
  std::vector<uint64_t> seen_heads_;        // by rank: its head of our ring, as last read
  std::vector<uint64_t> heads_;             // by rank: bytes taken from its ring to us
  std::vector<RoundMessage> taken_;         // ReadRing's, its buffer reused
  std::vector<uint64_t> bells_sent_;        // by rank: doorbells we wrote to it
  std::vector<uint64_t> bells_read_;        // by rank: doorbells we read from it
  bool woken_ = false;                      // Woken() since the last Poll
  unsigned polls_ = 0;
};

}  // namespace kolo::transport
