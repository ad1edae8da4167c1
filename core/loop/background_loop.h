// BackgroundLoop: the one background thread of a rank (DESIGN.md §1, §4), as a small
// orchestrator: it owns the thread, the wake-up, the loop's life (one LoopState,
// core/loop/loop_state.h) and the order of a pass, and turns every job-fatal error into an
// abort that fails all pending and later ops with one root-cause message (DESIGN.md §5). The
// work is its collaborators', each with its own state:
//   ControllerSession  the control stream: requests out, messages in, keepalives, clock
//                      pings, the root cause of a failed collective
//   ResponseRunner     decided responses: sequence, response cache, join stand-ins, process
//                      sets, the executors
//   RoundDriver        the fast path's I/O around FastPath's decisions (with a RoundLane:
//                      docs/FAST-PATH.md)
//   AsyncOps           ops an executor completes on its own thread (device collectives)
//   LoopTasks          short tasks handed to the loop (RunOnLoop)
//   OpCompleter        callbacks and the end of each op's span
// They return what must end the job as a Fault (core/loop/fault.h); AbortOn carries it out.
//
// Threading: Start and Stop are called by the owning Runtime (any one thread). The loop's
// work runs on its own thread, or on a blocking caller's thread that Drive()s the loop while
// the loop's thread is idle, one of them at a time, under loop_mu_ ("the loop thread" in the
// collaborators' headers). The queue, channel, executor, data plane and clock must outlive the
// loop. Every deadline the loop computes comes from Wiring::clock.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/control_channel.h"
#include "core/data_plane.h"
#include "core/executor.h"
#include "core/logging.h"
#include "core/loop/async_ops.h"
#include "core/loop/callback_thread.h"
#include "core/loop/controller_session.h"
#include "core/loop/fast_path.h"
#include "core/loop/fault.h"
#include "core/loop/loop_state.h"
#include "core/loop/loop_tasks.h"
#include "core/loop/op_completer.h"
#include "core/loop/response_runner.h"
#include "core/loop/round_driver.h"
#include "core/mutex.h"
#include "core/process_sets.h"
#include "core/round_lane.h"
#include "core/spin_wait.h"
#include "core/tensor_queue.h"
#include "core/timeline/op_tracer.h"
#include "core/wakeup.h"
#include "kolo/options.h"

namespace kolo {

class BackgroundLoop {
 public:
  // What the composition root wires in besides the job's options.
  struct Wiring {
    // Told the best estimate so far of (controller wall clock - this rank's wall clock) and
    // the round trip it was measured with, in µs (timeline alignment across hosts). Null: no
    // clock pings.
    std::function<void(double offset_us, double rtt_us)> on_clock_offset;
    // Where the fast path's negotiations are drawn (rank 0: the timeline;
    // core/timeline/round_trace.h).
    TraceSink* negotiation_sink = nullptr;
    // An open round is polled for up to a round trip before the thread sleeps (RoundDriver).
    // The runtime sets it; tests that drive a manual clock leave it off.
    bool spin_for_rounds = false;
    // What a polling thread does between two looks (core/spin_wait.h): the round's poll and a
    // driving caller's passes (Drive) keep the core where every rank of the host has one,
    // else yield it.
    BetweenPolls between_polls = BetweenPolls::kYield;
    // Where time comes from (deadlines, keepalives, the fast path, trace timestamps); tests
    // pass a ManualClock. Sleeps are real time, at most kMaxIdleWait each, so a manual clock
    // that moves is seen within that.
    const Clock* clock = SteadyClock::Get();
    // Process sets (ResponseRunner::Config): the registry, the executor of a set's responses,
    // and the notice that a set is gone. Null registry: a job without sets.
    ProcessSets* process_sets = nullptr;
    std::function<Executor*(int process_set)> set_executor;
    std::function<void(int process_set)> set_removed;
    // Rank 0 with KOLO_AUTOTUNE: observes the allreduces this rank runs and sets the fusion
    // threshold of its round messages (core/autotuner.h). Null: no tuning here.
    Autotuner* autotuner = nullptr;
  };

  // Reads this rank's rank and the job's size and KOLO_TIMEOUT_SECONDS (the longest wait for
  // the job-wide shutdown, for a launched op at the end, for RunOnLoop's task; the control
  // stream's keepalives), and with a lane what FastPath reads, from `options`, which must
  // outlive the loop. `tracer` may be null (no timeline); `lane` may be null (no fast path:
  // every op goes through the controller). All ranks of a job must agree on whether there is
  // a lane.
  BackgroundLoop(const Options& options, Wiring wiring, TensorQueue* queue, Wakeup* wakeup,
                 ControlChannel* channel, Executor* executor, DataPlane* data_plane,
                 OpTracer* tracer, Logger logger, RoundLane* lane = nullptr);
  BackgroundLoop(Options&&, Wiring, TensorQueue*, Wakeup*, ControlChannel*, Executor*, DataPlane*,
                 OpTracer*, Logger, RoundLane* = nullptr) = delete;  // it keeps a reference
  ~BackgroundLoop();                                                 // Stop()s if still running

  void Start();

  // Runs `task` (which must be short) on the background thread between two responses, so
  // after the callbacks and trace events of everything already completed, and waits for it.
  // If the loop does not take it within KOLO_TIMEOUT_SECONDS (a long ring), withdraws it
  // and fails with DeadlineExceeded: a task never runs after RunOnLoop returned. Runs it on
  // the calling thread when the loop is not running. FailedPrecondition from a callback.
  Status RunOnLoop(std::function<void()> task);

  // Runs `task` on the calling thread while the background thread keeps off the loop's work
  // (and so off the executors and the data plane): a pass the loop is in (its callbacks
  // included) finishes first, and the loop starts none until `task` returns. For the data
  // plane alone (internal::RawAllreduce), which so costs no hand-off between threads. `task`
  // must be bounded (a collective is, by the data plane's deadline). FailedPrecondition from
  // a callback.
  Status RunWithDataPlane(const std::function<void()>& task);

  // A blocking call's op, run on the calling thread instead of handed to the background one:
  // if the loop is idle (its thread asleep or waiting), the job running, and the caller's op
  // the only one in flight on this rank, runs the loop's passes here until `done()` or
  // `budget` (real time) has passed, then lets the background thread carry on. Callbacks
  // that complete meanwhile run here, with this thread marked as a kolo thread. Returns
  // whether it ran any pass; false costs nothing. `done` must be cheap and thread-safe.
  bool Drive(const std::function<bool()>& done, std::chrono::microseconds budget);

  // Ends the job on every rank with `why` (Runtime::AbortJob): the loop, at its next pass,
  // tells the controller, waits a bounded time for its verdict (`why` with the ranks that had
  // not submitted the pending ops; ControllerSession::RootCause's grace) and fails every
  // pending and later op with it. Does not wait: the caller waits on its own op, which fails
  // then. A loop inside a collective's transfer gets to it once that ends (its data-plane
  // deadline). False when the loop has ended (the job is over already). Any thread, callbacks
  // included.
  bool AbortJob(const Status& why);

  // True when called from any runtime's background thread, where callbacks run: blocking
  // kolo calls must refuse there, since the thread would wait on itself.
  static bool IsBackgroundThread() { return OnCallbackThread(); }

  // Closes the queue, tells the controller this rank is leaving, keeps executing responses
  // for ops already submitted until the controller's job-wide Shutdown arrives (or
  // KOLO_TIMEOUT_SECONDS pass), fails what is left with kShutdown, and joins the thread.
  // Returns OK after a clean shutdown, the abort's root cause after an abort, or
  // DeadlineExceeded if the job-wide shutdown did not come in time. Idempotent. Fails with
  // FailedPrecondition, changing nothing, when called from a background thread (a callback).
  Status Stop();

 private:
  // The thread: RunLoop, whatever it throws turned into an abort, then the last tasks.
  void Run();
  // Sleep, Pass, until kDone.
  void RunLoop() KOLO_EXCLUDES(loop_mu_);
  // One pass of the loop's work after a wake-up: control messages, failed device ops, tasks,
  // new requests, rounds, keepalive, the life cycle.
  void Pass() KOLO_REQUIRES(loop_mu_);
  // The control stream's messages, each handled as it comes.
  void DrainControl() KOLO_REQUIRES(loop_mu_);
  void HandleMessage(const ControllerMessage& message) KOLO_REQUIRES(loop_mu_);
  void HandleShutdown() KOLO_REQUIRES(loop_mu_);
  // Ops enqueued since the last pass: to the fast path, or announced to the controller.
  void SendNewRequests() KOLO_REQUIRES(loop_mu_);
  // The rounds' steps, as far as they get now (and while spin_for_rounds spins for an answer).
  void StepRounds() KOLO_REQUIRES(loop_mu_);
  // Device ops that failed: the first aborts the job; the others fail with it.
  void DrainAsyncFailures() KOLO_REQUIRES(loop_mu_);
  // Waking for rounds. A peer's round message wakes this rank's sleeping thread only while
  // RoundsMustWake: not while the rank is quiet (nothing in flight and FastPath::Quiet). A
  // peer's round can wait for a quiet rank, since nothing a round decides can run without
  // this rank's own op, whose enqueue wakes the thread (or whose caller polls the lane
  // itself); the idle wait's kMaxIdleWait answers it meanwhile. So a quiet rank, between a
  // blocking call's return and its next one or while the application computes, costs its
  // peers no doorbell (a system call on their critical path over shared memory), is not
  // woken by them, and its answer to a round that came early carries its new op: one round
  // instead of two.
  bool RoundsMustWake() KOLO_REQUIRES(loop_mu_);
  // The step of the loop's life that may come next (the stop notice, the stop deadline, the
  // end after the job-wide Shutdown), checked once per pass.
  void AdvanceLife() KOLO_REQUIRES(loop_mu_);
  void MoveTo(LoopState next) KOLO_REQUIRES(loop_mu_);
  bool serving() const KOLO_REQUIRES(loop_mu_) { return Serving(state_); }
  // Job-fatal, when `fault` is one and the job still runs: fails every pending and later op
  // with its error (after a failed collective, with the root cause the controller names
  // within a bounded wait), and tells the controller unless it is what reported the error.
  void AbortOn(const Fault& fault) KOLO_REQUIRES(loop_mu_);
  void FailAll(const Status& why) KOLO_REQUIRES(loop_mu_);
  // The end of the loop's life: no launched op in flight any more, then kDone.
  void Finish() KOLO_REQUIRES(loop_mu_);
  // Sleeps until woken, `deadline` (this loop's clock) or kMaxIdleWait, whichever is first.
  // The loop's own thread only: wakeup_ takes one waiter at a time (a driving caller that
  // must wait polls instead: AbortOn).
  void Sleep(Clock::TimePoint deadline, const std::vector<int>& fds = {});

  // Constant after construction.
  const Options& options_;
  TensorQueue* const queue_;
  Wakeup* const wakeup_;
  Executor* const executor_;
  DataPlane* const data_plane_;
  const Logger logger_;
  const Clock* const clock_;
  const BetweenPolls between_polls_;  // Wiring::between_polls, for Drive

  std::atomic<bool> stop_requested_{false};  // set by Stop() (any thread), read by the loop
  LoopTasks tasks_;                          // its own lock
  const OpCompleter completer_;              // any thread

  // Held by whichever thread does the loop's work: the background thread for each pass (not
  // while it sleeps), a blocking caller driving its op (Drive), or RunWithDataPlane's task.
  Mutex loop_mu_;
  LoopState state_ KOLO_GUARDED_BY(loop_mu_) = LoopState::kRunning;
  Status final_status_ KOLO_GUARDED_BY(loop_mu_);
  Clock::TimePoint stop_deadline_ KOLO_GUARDED_BY(loop_mu_);  // kDraining: leave from then on
  // Drive's `done` while a blocking caller runs the passes, else null: a step of the rounds
  // hands back as soon as the caller's op completed, AbortOn polls instead of sleeping.
  const std::function<bool()>* drive_done_ KOLO_GUARDED_BY(loop_mu_) = nullptr;
  std::vector<TensorEntry*> fresh_ KOLO_GUARDED_BY(loop_mu_);  // SendNewRequests' buffer
  ControllerSession session_ KOLO_GUARDED_BY(loop_mu_);
  AsyncOps async_;  // launches under loop_mu_; its own lock for the completion threads
  // The fast path's decisions and I/O; both null without a lane.
  const std::unique_ptr<FastPath> fast_ KOLO_PT_GUARDED_BY(loop_mu_);
  ResponseRunner runner_ KOLO_GUARDED_BY(loop_mu_);
  const std::unique_ptr<RoundDriver> rounds_ KOLO_PT_GUARDED_BY(loop_mu_);

  std::thread thread_;        // started by Start(), joined by Stop()
  bool stop_called_ = false;  // owner thread only
};

}  // namespace kolo
