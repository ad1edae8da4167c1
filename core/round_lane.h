// RoundLane: the connections over which ranks agree, without the controller, on which cached
// tensors run next (the fast path, docs/FAST-PATH.md). One small message per rank per round,
// sent to every peer. transport/ implements it over a second set of authenticated TCP
// connections of the data mesh (transport/tcp/tcp_round_lane.h) and, when every rank shares
// one host, through the shared-memory segment with those connections as doorbells
// (transport/shm/shm_round_lane.h).
//
// Threading: the loop's thread only (the background thread, or a blocking caller that drives
// the loop while that one sleeps: one at a time, under BackgroundLoop::loop_mu_). Nothing here
// blocks: what a peer cannot take yet is kept and sent by later calls (a round message is 48
// bytes plus 4 per cache id).
#pragma once

#include <cstdint>
#include <vector>

#include "kolo/status.h"

namespace kolo {

// One rank's part of one round.
struct RoundMessage {
  uint64_t round = 0;         // 1, 2, 3, ... on every rank
  uint64_t received_seq = 0;  // the highest controller response sequence number received
  bool joined = false;        // a join of this rank is in flight: ready for every allreduce
  bool stopping = false;      // this rank called shutdown(): it sends every op to the controller
  // This rank's KOLO_FUSION_THRESHOLD: a round fuses under the smallest, so that ranks that
  // were configured differently still cut the same responses.
  uint64_t fusion_threshold = 0;
  std::vector<uint32_t> ready;     // cache ids of this rank's waiting cached allreduces, sorted
  std::vector<uint32_t> diverted;  // cache ids this rank sent to the controller instead, sorted
};
bool operator==(const RoundMessage& a, const RoundMessage& b);

class RoundLane {
 public:
  virtual ~RoundLane() = default;

  // Sends `message` to every other rank that has not closed its connection (a failed send
  // reports the peer as closed from the next Poll).
  virtual Status SendToAll(const RoundMessage& message) = 0;

  // Reads whatever arrived without blocking and appends every complete message to `out` as
  // (sender rank, message), in arrival order per sender. A peer that closed its connection is
  // reported in `closed` (once); a malformed message is an error naming the sender.
  virtual Status Poll(std::vector<std::pair<int, RoundMessage>>* out, std::vector<int>* closed) = 0;

  // File descriptors that become readable when Poll has something to do, once Arm() said so.
  virtual std::vector<int> fds() const = 0;

  // Called before the thread stops polling to wait on fds(): from now until the next Poll,
  // anything that arrives makes fds() readable. False if something has arrived already (Poll
  // instead of waiting). A lane that always makes fds() readable returns true; one that rings
  // only sleepers (the shared-memory lane) saves its peers that work while this rank polls.
  virtual bool Arm() { return true; }

  // Called when the thread's wait on fds() has returned (for whatever reason): a lane that
  // does not read its connections on every Poll reads them on the next.
  virtual void Woken() {}

  // True if fds() become readable only while armed: a thread that polls the lane itself
  // while another sleeps on fds() (BackgroundLoop::Drive) need not mute them.
  virtual bool wakes_only_when_armed() const { return false; }
};

}  // namespace kolo
