// FastPath: the decisions of the fast path (docs/FAST-PATH.md), without I/O. Cached allreduces,
// broadcasts, allgathers, reducescatters and alltoalls (of any process set, on CPU, a group's all
// together) and barriers wait here for a round in which every member of their set reports them
// ready (every other rank reports every id of a set it is not in) instead of going to the
// controller, and every controller response also waits here until a round decides where it runs, so
// that all ranks run everything in one order. Plain data in, decisions out, like the controller's
// Negotiator: its owner, the RoundDriver, feeds it this rank's new ops, the controller's responses,
// the peers' round messages and the time, and carries out what it returns (sends a round message or
// requests, runs the next Work). Its parts: the rounds themselves (RoundAgreement), what of this
// rank's waits on them (WaitingOps) and the order work runs in (WorkOrder). What a cache id
// stands for it reads from the OpCache, which the ResponseRunner writes as it runs the
// responses this hands out.
//
// Threading: not thread-safe; owned by the RoundDriver (the loop thread). TensorEntry pointers
// it holds belong to the tensor queue; DropEntries() forgets them when the queue fails them all.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/autotuner.h"
#include "core/clock.h"
#include "core/loop/op_cache.h"
#include "core/loop/round_agreement.h"
#include "core/loop/waiting_ops.h"
#include "core/loop/work_order.h"
#include "core/messages.h"
#include "core/tensor_entry.h"
#include "core/timeline/round_trace.h"
#include "core/trace_sink.h"
#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo {

// What KOLO_EAGER_BYTES unset lets a round message carry of inputs over TCP rounds.
inline constexpr uint64_t kEagerAutoBytes = 4096;

// Stages a lone allreduce's input in the data plane before its round message goes
// (Executor::StageInput; docs/FAST-PATH.md, "Staged inputs"): the number of the exchange it was
// staged for, or nullopt. Called on the loop's thread while a message is made; null: nothing is
// staged.
using RoundStager = std::function<std::optional<uint64_t>(const OpSignature&, const TensorEntry&)>;

// The peers whose round lane closed, and how many (so the per-pass deadline check scans
// nothing in the common case). FastPath's.
struct FastPathClosedLanes {
  std::vector<bool> by_rank;
  int count = 0;
};

class FastPath {
 public:
  using TimePoint = Clock::TimePoint;

  using Work = WorkOrder::Work;

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
  // KOLO_STALL_CHECK_SECONDS (DivertAfterSeconds) from `options`, which must outlive it, as
  // must `cache`. `negotiation_sink` may be null (rank 0 draws the rounds' negotiations;
  // core/timeline/round_trace.h). `autotuner`: rank 0 with KOLO_AUTOTUNE, else null; the
  // threshold its round messages carry comes from it (core/autotuner.h), and so does the
  // hierarchical rule while it tunes that.
  // `shared_memory_rounds`: the lane goes through shared memory, where KOLO_EAGER_BYTES unset
  // sends no eager inputs (docs/FAST-PATH.md, "Eager"); over TCP it sends kEagerAutoBytes.
  // `stager` (may be null) stages a lone allreduce's input as its message is made.
  FastPath(const Options& options, const OpCache* cache, TraceSink* negotiation_sink,
           const Autotuner* autotuner = nullptr, bool shared_memory_rounds = false,
           RoundStager stager = nullptr);
  FastPath(Options&&, const OpCache*, TraceSink*, const Autotuner* = nullptr, bool = false,
           RoundStager = nullptr) = delete;

  // How long a cached allreduce waits for the other ranks before it goes to the controller
  // instead, whose stall inspector then watches it: well within KOLO_STALL_CHECK_SECONDS
  // (half of it, at most 1 s; 1 s when stall checks are off).
  static double DivertAfterSeconds(const Options& options);

  // --- This rank's ops. ---
  // A new op of this rank's, with the cache id its request carries (0: in full): true if it
  // waits here. A cached op waits for a round when WaitingOps::Wait allows and no rank is
  // stopping; one sent in full whose name had an id diverts that id (the peers' copies meet it
  // at the controller). A join (which also starts this rank's join here: WaitingOps::Join) or a
  // set's removal is held behind this rank's waiting cached ops, as it would follow them on the
  // controller's stream; TakeReleased hands it back.
  // A barrier waits only with nothing of this rank's before it in flight (`behind_others`
  // false), so that a round running it cannot overtake an earlier op of this rank's; else it
  // goes to the controller and diverts its id (docs/FAST-PATH.md, "Which ops").
  bool Offer(TensorEntry* entry, uint32_t cache_id, TimePoint now, bool behind_others = false);
  // A group's members, in its order, with their requests' cache ids: true if they all wait for a
  // round (WaitingOps::WaitGroup), false if they all go to the controller.
  bool OfferGroup(const std::vector<TensorEntry*>& entries, const std::vector<uint32_t>& cache_ids,
                  TimePoint now);
  // The next held join or removal that may go to the controller now, or null. They go in the
  // order they were held: one held behind another waits for it.
  TensorEntry* TakeReleased() { return waiting_.TakeReleased(); }
  // shutdown() was called on this rank: nothing new takes the fast path; rounds say so.
  void SetStopping() { stopping_ = true; }

  // --- Input. ---
  // The controller's next response (in sequence; a gap is a protocol error).
  Status ReceiveResponse(Response response) { return order_.Receive(std::move(response)); }
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
  // teach new cache ids (the runner writes them into the OpCache; handing it out ends the
  // instance of the ids it names here). Pass the same Work each time: its buffers are reused,
  // so a small op's work allocates nothing once the names fit.
  bool NextWork(TimePoint now, Work* work);
  // DeadlineExceeded / Unavailable naming the ranks when a round or a controller response
  // waited too long, or a peer that has to answer closed its connection.
  Status CheckDeadlines(TimePoint now) const;

  // --- State for the loop. ---
  // A round message of this rank's is out and not answered by every peer yet.
  bool waiting() const { return rounds_.waiting(); }
  // No round is open and this rank has news to start one with (Advance would send it).
  bool WantsRound() const { return !rounds_.waiting() && NeedRound(); }
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
  bool NeedRound() const;
  RoundMessage MakeRound(TimePoint now);
  Status ApplyDecision(RoundDecision decision, TimePoint now, Outbox* out);

  // Constant after construction.
  const Options& options_;
  const OpCache* const cache_;
  const Autotuner* const autotuner_;
  // What a round message carries of its ops' inputs: up to eager_bytes of them
  // (KOLO_EAGER_BYTES), and the input `stager` staged (may be null).
  struct InputParts {
    uint64_t eager_bytes = 0;
    RoundStager stager;
  };
  const InputParts inputs_;

  RoundAgreement rounds_;
  RoundTrace round_trace_;
  WaitingOps waiting_;
  WorkOrder order_;
  bool stopping_ = false;  // this rank called shutdown()
  bool closed_ = false;    // some rank is stopping: every op goes to the controller
  RoundMessage last_sent_;
  FastPathClosedLanes closed_lanes_;
  std::vector<bool> peer_stopping_;  // by rank: its last round message said `stopping`
};

}  // namespace kolo
