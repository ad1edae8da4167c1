// RoundDriver: the fast path's I/O (docs/FAST-PATH.md) around FastPath's decisions
// (core/loop/fast_path.h), and the FastPath's one owner: everything the loop tells it goes
// through here. It offers this rank's new ops to the fast path, hands it the controller's
// responses, reads the peers' round messages from the lane and sends this rank's, sends to the
// controller the cached ops that leave the path (and the joins and removals it held back), runs
// what the rounds decided, in order, through the ResponseRunner (which writes what the
// responses teach into the OpCache the FastPath reads), and says when the lane must wake the
// sleeping loop (RoundsMustWake in core/loop/background_loop.h). Whatever must end the job
// comes back as a Fault for the loop.
//
// Threading: not thread-safe; the thread that does the loop's work (under
// BackgroundLoop::loop_mu_). Everything it is given must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/autotuner.h"
#include "core/clock.h"
#include "core/logging.h"
#include "core/loop/controller_session.h"
#include "core/loop/fast_path.h"
#include "core/loop/fault.h"
#include "core/loop/response_runner.h"
#include "core/round_lane.h"
#include "core/spin_wait.h"
#include "core/tensor_entry.h"
#include "core/trace_sink.h"
#include "core/wakeup.h"
#include "kolo/options.h"

namespace kolo {

class RoundDriver {
 public:
  // `spin_for_rounds`: an open round is polled for up to a round trip before the thread
  // sleeps, `between_polls` between looks (core/spin_wait.h). With a core of its own a rank
  // hears a ready peer's answer within a loopback transit, and keeps its core meanwhile (a
  // yield would hand it to another process for a time slice on a busy host); on cores its
  // host's ranks outnumber, a yield hands the core to a peer that is runnable, where sleeping
  // would cost a doorbell and a wake-up per round step (docs/PERFORMANCE.md, "Waiting on
  // oversubscribed cores"). Needs a clock that moves on its own. The FastPath reads `options`
  // (FastPath's constructor), which must outlive it, the runner's OpCache and, rank 0 with
  // KOLO_AUTOTUNE, `autotuner` (else null); `negotiation_sink` may be null. `stager` (may be
  // null) stages a lone allreduce's input before its round message goes (RoundStager).
  RoundDriver(const Options& options, TraceSink* negotiation_sink, const Autotuner* autotuner,
              RoundLane* lane, ResponseRunner* runner, ControllerSession* session, Wakeup* wakeup,
              const Clock* clock, Logger logger, bool spin_for_rounds, BetweenPolls between_polls,
              RoundStager stager = nullptr);

  // A new op of this rank: true if the fast path takes it (it waits for a round; a join or a
  // set's removal waits for this rank's cached ops), false if it goes to the controller as
  // `cache_id` (0: in full) says.
  // `behind_others`: a barrier with earlier ops of this rank's in flight (FastPath::Offer).
  bool Take(TensorEntry* entry, uint32_t cache_id, Clock::TimePoint now,
            bool behind_others = false) {
    return fast_.Offer(entry, cache_id, now, behind_others);
  }
  // A group's members, all or none (FastPath::OfferGroup).
  bool TakeGroup(const std::vector<TensorEntry*>& entries, const std::vector<uint32_t>& cache_ids,
                 Clock::TimePoint now) {
    return fast_.OfferGroup(entries, cache_ids, now);
  }
  // The controller's next response: it runs once a round decided where it goes in the order.
  Fault Receive(Response response) {
    return Fault::Here(fast_.ReceiveResponse(std::move(response)));
  }
  // shutdown() was called on this rank (FastPath::SetStopping).
  void SetStopping() { fast_.SetStopping(); }
  // The queue fails every entry (FastPath::DropEntries).
  void DropEntries() { fast_.DropEntries(); }
  // What the loop reads of the fast path: Quiet, Settled, Done.
  const FastPath& fast() const { return fast_; }

  // One step of the rounds: reads the peers' messages, advances the decisions, sends what is
  // due, runs what was decided. `progress`: something was sent, decided or run. `caller_done`:
  // `*done` (a driving caller's op is complete; null when none drives) turned true after work
  // ran, so the rest of the pass is the next one's (the caller's return is the op's latency).
  struct Step {
    Fault fault;
    bool progress = false;
    bool caller_done = false;
  };
  Step StepOnce(const std::function<bool()>* done);
  // Between steps with no progress: true (after a pause, between_polls) while a round of this
  // rank's is open and young enough to poll for its answer instead of sleeping
  // (spin_for_rounds).
  bool SpinForAnswer() const;
  // After the steps: a round or a controller response that waited too long.
  Fault CheckDeadlines() const;

  // --- Waking the sleeping loop for rounds. ---
  // The lane's file descriptors, for the loop's wait.
  std::vector<int> fds() const { return lane_->fds(); }
  // Lets the peers' round messages wake the sleeping thread: arms a lane that wakes only when
  // armed (false: a message is in already; do not sleep), else unmutes the round sockets.
  bool WakeForRounds();
  // The opposite, for a lane whose sockets wake the wait: mutes them (a lane that wakes only
  // when armed is disarmed by its next poll).
  void MuteRounds();
  // The loop's wait on fds() returned.
  void Woken() { lane_->Woken(); }

 private:
  Fault PollLane(Clock::TimePoint now);
  // FastPath::Advance and what it has to send (out_), to the controller and the peers.
  Fault AdvanceAndSend(Clock::TimePoint now);
  Fault SendToController(const std::vector<uint32_t>& cache_ids);
  // Runs what the rounds decided, in order, as far as received; `*ran`: anything ran. `now`:
  // the step's time, for the first look (the clock is read again after work ran).
  Fault RunDecided(Clock::TimePoint now, bool* ran);

  // Constant after construction.
  RoundLane* const lane_;
  ResponseRunner* const runner_;
  ControllerSession* const session_;
  Wakeup* const wakeup_;
  const Clock* const clock_;
  const Logger logger_;
  const bool spin_for_rounds_;
  const BetweenPolls between_polls_;

  FastPath fast_;
  FastPath::Work work_;   // RunDecided's, its buffers reused from op to op
  FastPath::Outbox out_;  // StepOnce's, likewise
  std::vector<std::pair<int, RoundMessage>> polled_;  // PollLane's, likewise
  std::vector<int> closed_peers_;                     // likewise
  bool muted_ = false;  // MuteRounds muted the round sockets in wakeup_
};

}  // namespace kolo
