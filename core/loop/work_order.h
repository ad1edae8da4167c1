// WorkOrder: the one order in which every rank runs what the controller and the fast path's
// rounds decided (docs/FAST-PATH.md, "The rule"): the controller's responses in sequence, each
// round's cached ops after the responses the round runs through, cut into fused batches under
// the controller's rule (core/fusion/fusion_rule.h) and the round's smallest threshold. Part of
// FastPath, which hands it the responses as they arrive and the rounds' decisions as they
// complete, and takes the next Work from it.
//
// Threading: not thread-safe; FastPath's (the loop thread). TensorEntry pointers it holds
// belong to the tensor queue; Drop() forgets them.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "core/clock.h"
#include "core/loop/op_cache.h"
#include "core/loop/round_agreement.h"
#include "core/messages.h"
#include "core/tensor_entry.h"
#include "kolo/status.h"

namespace kolo {

class WorkOrder {
 public:
  using TimePoint = Clock::TimePoint;

  // The next thing to run, in the order every rank runs it: a controller response
  // (`entries` empty: the loop finds this rank's entries by name), or a fused batch of cached
  // ops a round decided (`entries` parallel to response.names; null where this rank joined
  // without an allreduce and runs zeros).
  struct Work {
    bool from_controller = false;
    Response response;
    std::vector<TensorEntry*> entries;
  };

  // What this rank runs of a round's decision.
  struct Decided {
    RoundDecision decision;
    // What this rank runs of decision.runnable (not the other sets' ids), in run order
    // (OrderBySet).
    std::vector<uint32_t> ids;
    // Parallel to ids: this rank's entry, or null where its message said `joined` without the
    // id. Taken out of what waits for a round when decided, so that nothing decided can be
    // diverted or announced again while it waits to run.
    std::vector<TensorEntry*> entries;
    // Parallel to ids: what each id stood for when it was decided.
    std::vector<FastSpec> specs;
    size_t next = 0;       // ids[next..] not cut into Work yet
    uint64_t batches = 0;  // Work cut from it so far
  };

  // The controller's next response (in sequence; a gap is a protocol error).
  Status Receive(Response response);
  // A round decided to run the controller's responses through `seq` before its own ops.
  void DecidedThrough(uint64_t seq) { decided_seq_ = std::max(decided_seq_, seq); }
  // A round's decision, after the earlier ones.
  void Add(Decided decided);
  // A blank Decided to fill for Add: the last one Next finished with, its vectors' buffers
  // kept, so that a small op's round allocates as little as it can. Its `specs` keep their
  // elements, to be assigned over (their strings' buffers reused) and then cut to `ids`.
  Decided TakeSpare();
  // Fills `*work` with the next work in the agreed order and returns true; false if none is
  // decided, or if it waits for a controller response this rank has not received yet (the
  // deadline runs from then). Pass the same Work each time: its buffers are reused, so a small
  // op's work allocates nothing once the names fit.
  bool Next(TimePoint now, Work* work);
  // DeadlineExceeded when the front decision waited `timeout_seconds` (KOLO_TIMEOUT_SECONDS)
  // for a controller response another rank has received.
  Status CheckBlocked(TimePoint now, double timeout_seconds) const;

  uint64_t received_seq() const { return received_seq_; }
  uint64_t decided_seq() const { return decided_seq_; }
  // Every response received has been handed out, none waits for a round, and nothing decided
  // is left.
  bool Done() const {
    return decided_.empty() && handed_seq_ == received_seq_ && received_seq_ <= decided_seq_;
  }
  // The job ends: nothing held here runs.
  void Drop();

 private:
  // Orders a decision's ids by process set (the job's first), ascending within each, so that
  // a set's ids are consecutive on every rank and its members cut the same fused transfers
  // (by ids alone a rank in two sets would cut set 1's run where a set 2 id falls between,
  // and a rank of set 1 only would not). Still one order on every rank.
  static void OrderBySet(Decided* decided);
  // The front decision's next batch.
  void Cut(Work* work);

  std::deque<Response> received_;  // controller responses not handed out yet, in seq order
  uint64_t received_seq_ = 0;
  uint64_t handed_seq_ = 0;   // the last controller response Next handed out
  uint64_t decided_seq_ = 0;  // the highest run_through_seq decided so far
  std::deque<Decided> decided_;
  Decided spare_;         // the last decision Next finished with (TakeSpare)
  bool blocked_ = false;  // the front decision waits for a controller response
  TimePoint blocked_since_;
};

}  // namespace kolo
