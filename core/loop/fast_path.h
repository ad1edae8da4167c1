// FastPath: the decisions of the fast path (docs/FAST-PATH.md), without I/O. Cached allreduces,
// broadcasts, allgathers, reducescatters and alltoalls (of any process set, on CPU, not grouped)
// wait here
// for a round in which every member of their set reports them ready (every other rank
// reports every id of a set it is not in) instead of going to the
// controller, and every controller response also waits here until a round decides where it
// runs, so that all ranks run everything in one order. Plain data in, decisions out, like the
// controller's Negotiator: the background loop feeds it this rank's cached ops, the controller's
// responses, the peers' round messages and the time, and carries out what it returns (sends a
// round message or requests, runs the next Work). The rounds themselves are RoundAgreement's.
//
// Threading: not thread-safe; owned by the background thread. TensorEntry pointers it holds
// belong to the tensor queue; DropEntries() forgets them when the queue fails them all.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/autotuner.h"
#include "core/clock.h"
#include "core/loop/round_agreement.h"
#include "core/messages.h"
#include "core/round_lane.h"
#include "core/tensor_entry.h"
#include "core/timeline/round_trace.h"
#include "core/trace_sink.h"
#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo {

// What a cached op's id stands for; identical on every rank (from the controller's response
// that assigned the id, and for `fusion_bytes` the shape past dimension 0, which every rank
// agreed on).
struct FastSpec {
  std::string name;
  OpType op = OpType::kAllreduce;  // allreduce, broadcast, allgather, reducescatter or alltoall
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  int root = -1;                    // broadcast
  int64_t num_elements = 0;         // as in the response (an allgather's: rank 0's input)
  std::vector<int64_t> first_dims;  // allgather: every rank's dimension 0
  std::vector<int64_t> splits;      // alltoall: the split matrix, as in its response
  int64_t fusion_bytes = 0;         // what it takes in a fusion buffer (FusionBytes)
  int process_set = 0;              // the set it runs in (0: the job's)
};

class FastPath {
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

  // What the loop sends after Advance: requests to the controller for `to_controller` (cache
  // ids of cached allreduces that leave the fast path), then `sends` over the round lane (each
  // to one peer, or to every peer: RoundAgreement::TakeSends). `round` is this rank's own
  // message when it started or answered a round (all-to-all: what `sends` carries to all).
  struct Outbox {
    std::vector<uint32_t> to_controller;
    std::optional<RoundMessage> round;
    std::vector<RoundSend> sends;
    bool progress = false;  // something was sent or decided
  };

  // Reads this rank's rank and the job's size, KOLO_FUSION_THRESHOLD (a round fuses under the
  // smallest any rank sent), KOLO_TIMEOUT_SECONDS (the longest wait for a peer's round
  // message, and for a controller response another rank has received) and
  // KOLO_STALL_CHECK_SECONDS (DivertAfterSeconds) from `options`, which must outlive it.
  // `negotiation_sink` may be null (rank 0 draws the rounds' negotiations;
  // core/timeline/round_trace.h).
  FastPath(const Options& options, TraceSink* negotiation_sink);
  FastPath(Options&&, TraceSink*) = delete;  // it keeps a reference

  // Rank 0 with KOLO_AUTOTUNE: the threshold its round messages carry comes from `autotuner`
  // (core/autotuner.h), and so does the hierarchical rule while it tunes that. Call before the
  // first round.
  void UseAutotuner(const Autotuner* autotuner) { autotuner_ = autotuner; }

  // How long a cached allreduce waits for the other ranks before it goes to the controller
  // instead, whose stall inspector then watches it: well within KOLO_STALL_CHECK_SECONDS
  // (half of it, at most 1 s; 1 s when stall checks are off).
  static double DivertAfterSeconds(const Options& options);

  // --- What the controller's responses taught about cache ids. ---
  // `id` now stands for `spec`; a cached allreduce of it may take the fast path.
  void Learn(uint32_t id, FastSpec spec);
  // `id` stands for an op of `spec.process_set`, which this rank is not a member of (only
  // name, op and process_set matter): its round messages report it ready, always (what a
  // member of every set would do the moment it has the op), so that the set's members alone
  // decide when it runs; it runs nothing of it. Such ids carry kEveryRankCacheIdBit
  // (core/messages.h). The name's earlier id, if another, is forgotten; `id` 0 only forgets.
  void LearnForeign(uint32_t id, FastSpec spec);
  // `process_set` has the job ranks `members`: rank 0's timeline counts only their readiness
  // for the set's ops (the others report every id of a set they are not in).
  void KnowSet(int process_set, const std::vector<int>& members);
  // `id` no longer stands for anything.
  void Forget(uint32_t id);
  // `process_set` was removed: its ids, this rank's own and foreign, stand for nothing.
  void ForgetSet(int process_set);
  // The controller ran (or failed) the instance of `id` it was sent: the next one may take
  // the fast path again (not while this rank's join of its set is in flight: see JoinSet).
  void InstanceOver(uint32_t id);

  // --- This rank's ops. ---
  // Takes `entry` (a cached request with `cache_id`) when it can wait for a round: a CPU
  // allreduce, broadcast, allgather, reducescatter or alltoall outside a group whose id is known
  // and not diverted, while no rank is stopping (and, but for an allreduce, this rank has not
  // joined: the controller names that error). False: the loop sends it to the controller.
  bool Offer(TensorEntry* entry, uint32_t cache_id, TimePoint now);
  // This rank sends a tensor whose metadata changed to the controller: the peers' cached
  // copies of `old_id` must meet it there (the controller names the mismatch).
  void DivertChanged(uint32_t old_id);
  // A join (of the job or of a set) must follow this rank's waiting cached ops, as it would
  // on the controller's stream: true if it is held (TakeReleased hands it back once they have
  // been decided).
  bool HoldJoin(TensorEntry* join);
  // A removal of a process set must reach the controller after this rank's waiting cached
  // ops of that set, which the controller would otherwise not see (it refuses a removal while
  // an op of the set is in flight): true if it is held. Those ops go to the controller at the
  // next pass between rounds (or run, if their round decides them first), and TakeReleased
  // hands the removal back once none waits here.
  bool HoldRemoval(TensorEntry* removal);
  // The next held join or removal that may go to the controller now, or null. They go in the
  // order they were held: one held behind another waits for it.
  TensorEntry* TakeReleased();
  // This rank's join is in flight (it contributes zeros) or over.
  void SetJoined(bool joined) { joined_ = joined; }
  // This rank's join of `process_set` is in flight or over. While it is, the set's ids go to
  // the controller on every member (which runs them with this rank's zeros): this rank
  // diverts every id of the set it is not waiting on itself, and each again after its
  // instance ran; and its own ops of the set go to the controller too.
  void JoinSet(int process_set, bool joined);
  // shutdown() was called on this rank: nothing new takes the fast path; rounds say so.
  void SetStopping() { stopping_ = true; }

  // --- Input. ---
  // The controller's next response (in sequence; a gap is a protocol error).
  Status ReceiveResponse(Response response);
  // A peer's round message (protocol errors name the sender).
  Status ReceiveRound(int from, RoundMessage message, TimePoint now);
  // A peer closed its round connection.
  void PeerClosed(int rank);

  // --- Decisions. ---
  // Diverts what waited too long (between rounds), starts or answers a round, and applies
  // every round now complete. An error is job-fatal (an inconsistent decision).
  Status Advance(TimePoint now, Outbox* out);
  // Fills `*work` with the next work in the agreed order and returns true; false if none is
  // decided, or if it waits for a controller response this rank has not received yet (the
  // deadline runs from then). Hand the work out one at a time: a controller response run may
  // teach new cache ids. Pass the same Work each time: its buffers are reused, so a small
  // op's work allocates nothing once the names fit.
  bool NextWork(TimePoint now, Work* work);
  // DeadlineExceeded / Unavailable naming the ranks when a round or a controller response
  // waited too long, or a peer that has to answer closed its connection.
  Status CheckDeadlines(TimePoint now) const;

  // --- State for the loop. ---
  // A round message of this rank's is out and not answered by every peer yet.
  bool waiting() const { return rounds_.waiting(); }
  TimePoint waiting_since() const { return rounds_.waiting_since(); }
  // This rank's stopping round went out, was answered, and nothing of this rank waits for a
  // round: its shutdown notice may go to the controller.
  bool Settled() const;
  // After the job-wide Shutdown: every response any rank received has run and no round of
  // this rank's is open (a peer may still need its answer).
  bool Done() const;
  // Nothing of this rank waits on the peers: no round of its own is open or due, no cached
  // allreduce or join waits, every controller response received has run, it is not
  // stopping, and it knows no op of a set it is not in (whose members' rounds need its answer
  // at once: it will never have an op of its own to answer with). A peer's round can then wait for
  // this rank's answer until the rank has an op of its own (core/loop/background_loop.h, "Waking
  // for rounds").
  bool Quiet() const;
  // The job ends (aborted or shut down) and the queue fails every entry: forget the entries
  // and the work held here; nothing of it runs.
  void DropEntries();

 private:
  struct Decided;
  bool NeedRound() const;
  RoundMessage MakeRound(TimePoint now);
  // What this rank's round messages carry as its fusion threshold.
  uint64_t FusionThreshold() const;
  // What they carry as its hierarchical rule (core/hierarchy_rule.h).
  uint64_t HierarchyMinBytes() const;
  void DivertWaiting(TimePoint now, Outbox* out);
  void Divert(uint32_t id, Outbox* out);
  Status ApplyDecision(RoundDecision decision, TimePoint now, Outbox* out);
  void CutHits(Work* work);
  // Orders a decision's ids by process set (the job's first), ascending within each, so that
  // a set's ids are consecutive on every rank and its members cut the same fused transfers
  // (by ids alone a rank in two sets would cut set 1's run where a set 2 id falls between,
  // and a rank of set 1 only would not). Still one order on every rank.
  static void OrderBySet(Decided* decided);
  bool JoinedSet(int process_set) const;
  // What `id` stands for, this rank's or another set's; null if nothing.
  const FastSpec* SpecOf(uint32_t id) const;
  // Whether `rank`'s readiness counts for `process_set`'s ops (a set not known here: yes).
  bool MemberOf(int process_set, int rank) const;
  // Whether a hit of `process_set` waits here.
  bool HoldsHitOf(int process_set) const;
  // Whether a held join or removal must still wait (see HoldJoin, HoldRemoval).
  bool MustHold(const TensorEntry* held) const;

  // Constant after construction.
  const Options& options_;
  const double divert_after_seconds_;
  const Autotuner* autotuner_ = nullptr;  // set once, before the first round

  RoundAgreement rounds_;
  RoundTrace round_trace_;
  std::unordered_map<uint32_t, FastSpec> specs_;
  struct Hit {
    TensorEntry* entry;
    TimePoint since;
    bool announced = false;  // in a round message of this rank already
  };
  std::map<uint32_t, Hit> hits_;          // waiting cached allreduces, by cache id
  std::map<uint32_t, FastSpec> foreign_;  // ids of the sets this rank is not in
  std::unordered_map<int, std::vector<bool>> set_members_;  // by set, by job rank
  bool foreign_news_ = false;             // foreign_ grew since this rank's last round message
  std::vector<int> joined_sets_;          // sets whose join of this rank is in flight
  std::set<uint32_t> diverted_;           // ids that go to the controller until their name runs
  std::vector<uint32_t> newly_diverted_;  // diverted by this rank since its last message
  bool joined_ = false;
  bool stopping_ = false;  // this rank called shutdown()
  bool closed_ = false;    // some rank is stopping: every op goes to the controller
  // Joins and remove_process_set requests held back (HoldJoin, HoldRemoval), in submission
  // order.
  std::deque<TensorEntry*> held_;

  std::deque<Response> received_;  // controller responses not handed out yet, in seq order
  uint64_t received_seq_ = 0;
  uint64_t handed_seq_ = 0;   // the last controller response NextWork handed out
  uint64_t decided_seq_ = 0;  // the highest run_through_seq decided so far
  struct Decided {
    RoundDecision decision;
    // What this rank runs of decision.runnable (not the other sets' ids), in run order
    // (OrderBySet).
    std::vector<uint32_t> ids;
    // Parallel to ids: this rank's entry, or null where its message said `joined` without the
    // id. Taken out of hits_ when decided, so that nothing decided can be diverted or
    // announced again while it waits to run.
    std::vector<TensorEntry*> entries;
    // Parallel to ids: what each id stood for when it was decided.
    std::vector<FastSpec> specs;
    size_t next = 0;       // ids[next..] not cut into Work yet
    uint64_t batches = 0;  // Work cut from it so far
  };
  std::deque<Decided> decided_;
  bool blocked_ = false;  // the front decision waits for a controller response
  TimePoint blocked_since_;
  RoundMessage last_sent_;
  std::vector<bool> lane_closed_;    // by rank
  std::vector<bool> peer_stopping_;  // by rank: its last round message said `stopping`
};

}  // namespace kolo
