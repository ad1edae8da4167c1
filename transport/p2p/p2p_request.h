// P2pRequest: one posted point-to-point op (a send or a receive) as the lane (p2p_lane.h) keeps
// it from its post to its completion, and P2pOffer: a send that arrived before any receive for it.
// The runtime fills in what the op is; the lane alone writes its progress, under its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/clock.h"
#include "kolo/op_args.h"
#include "kolo/types.h"
#include "transport/p2p/p2p_frame.h"

namespace kolo::transport {

struct P2pRequest {
  enum class State {
    kPosted,     // a send's offer is queued or out; a receive waits for a matching offer
    kPulled,     // a send's DATA is queued: it completes once written
    kReceiving,  // a receive matched an offer; its bytes are on their way (PULL sent)
    kDone,
  };

  // What the op is: set by the runtime before Post, constant afterwards.
  bool is_send = false;
  int peer = -1;  // a job rank; a receive's -1: any member of the set
  int set = 0;    // the process set it was posted in
  int64_t tag = 0;
  void* data = nullptr;
  uint64_t bytes = 0;
  DataType dtype = DataType::kFloat32;
  std::vector<int> members;  // the set's job ranks, ascending; empty: the whole job (set 0)
  std::string what;          // "send to rank 1 (tag 3)", in the caller's (set) ranks
  int* source = nullptr;     // a receive's: set to the sender's rank in the set
  Callback done;
  // The callback may run on whichever thread completes the op, Post included (a handle's
  // completion); else on the lane's thread or a driving caller's (kolo/p2p.h's contract).
  bool done_anywhere = false;
  double timeout_seconds = 30;

  // Progress: the lane's, under its lock.
  State state = State::kPosted;
  std::chrono::steady_clock::time_point deadline;
  uint64_t seq = 0;       // a send's offer number; a receive's matched offer number
  int matched_peer = -1;  // a receive's sender once matched (a job rank)
  Clock::TimePoint posted_at;
  Clock::TimePoint matched_at;
};

// A send that arrived with no receive posted for it: its OFFER, and its bytes when they came
// inline (complete: an offer is kept only once they are all here).
struct P2pOffer {
  int peer = -1;  // job rank of the sender
  P2pFrame frame;
  std::vector<uint8_t> payload;
  uint64_t arrival = 0;  // arrival order across all peers (a receive from any rank takes the first)
};

// The sender's rank as `request`'s caller numbers ranks (its set's), for messages and `source`.
int CallerRankOf(const P2pRequest& request, int job_rank);
// Whether receive `recv` takes an offer from job rank `peer` in `set` with `tag`.
bool Accepts(const P2pRequest& recv, int peer, int set, int64_t tag);

}  // namespace kolo::transport
