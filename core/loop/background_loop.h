// BackgroundLoop: the one background thread of a rank (DESIGN.md §1, §4). It sends new
// requests to the controller, receives responses in sequence order, runs them through the
// Executor, and invokes callbacks. It also turns every job-fatal error into an abort that
// fails all pending and later ops with one root-cause message (DESIGN.md §5). Its life is one
// LoopState (core/loop/loop_state.h names the states and the allowed transitions).
//
// With a RoundLane (the fast path, docs/FAST-PATH.md), allreduces whose metadata the
// controller has cached do not go to the controller: FastPath (core/loop/fast_path.h) decides, from
// the peers' round messages, which of them run and where every controller response runs, and
// this loop does the I/O and runs what it decided (core/loop/background_loop_rounds.cc).
//
// Threading: Start and Stop are called by the owning Runtime (any one thread). Everything
// else runs on the loop's own thread, which owns the response cache and the entries it took
// from the queue, or on a blocking caller's thread that Drive()s the loop while the loop's
// thread is idle (one of them at a time, under loop_mu_). The queue, channel, executor, data
// plane and clock must outlive the loop. Every deadline the loop computes comes from
// Config::clock.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/config/config_table.h"
#include "core/control_channel.h"
#include "core/data_plane.h"
#include "core/executor.h"
#include "core/logging.h"
#include "core/loop/fast_path.h"
#include "core/loop/loop_state.h"
#include "core/mutex.h"
#include "core/process_sets.h"
#include "core/round_lane.h"
#include "core/tensor_queue.h"
#include "core/timeline/op_tracer.h"
#include "core/wakeup.h"

namespace kolo {

class BackgroundLoop {
 public:
  struct Config {
    int rank = 0;
    double timeout_seconds =
        DefaultOptions().timeout_seconds;  // bound on waiting for the job-wide shutdown
    // Told the best estimate so far of (controller wall clock - this rank's wall clock) and
    // the round trip it was measured with, in µs (timeline alignment across hosts).
    std::function<void(double offset_us, double rtt_us)> on_clock_offset;
    int size = 1;
    // Fast path: the fusion threshold its responses are planned with (KOLO_FUSION_THRESHOLD),
    // and how long a cached allreduce waits for the other ranks before it is sent to the
    // controller instead (whose stall inspector then sees it).
    int64_t fusion_threshold_bytes = DefaultOptions().fusion_threshold_bytes;
    double divert_after_seconds = 1.0;
    // Where the fast path's negotiations are drawn (rank 0: the timeline;
    // core/timeline/round_trace.h).
    TraceSink* negotiation_sink = nullptr;
    // Every rank of this host has a core: an open round is polled, yielding the core to any
    // thread that wants it, for up to kRoundSpin before the thread sleeps.
    bool busy_poll = false;
    // Where time comes from (deadlines, keepalives, the fast path, trace timestamps); tests
    // pass a ManualClock. Sleeps are real time, at most kMaxIdleWait each, so a manual clock
    // that moves is seen within that.
    const Clock* clock = SteadyClock::Get();
    // Process sets (core/process_sets.h): the registry this loop applies the controller's
    // add/remove decisions to, and which responses it skips (those of sets this rank is not
    // in). Null: a job without sets (every response runs here, set responses are a protocol
    // error). `set_executor` gives the executor of a set's responses (its members only),
    // called on the loop thread; `set_removed` tells that a set is gone (its executor may go).
    ProcessSets* process_sets = nullptr;
    std::function<Executor*(int process_set)> set_executor;
    std::function<void(int process_set)> set_removed;
  };

  // `tracer` may be null (no timeline); `lane` may be null (no fast path: every op goes
  // through the controller). All ranks of a job must agree on whether there is a lane.
  BackgroundLoop(const Config& config, TensorQueue* queue, Wakeup* wakeup, ControlChannel* channel,
                 Executor* executor, DataPlane* data_plane, OpTracer* tracer, Logger logger,
                 RoundLane* lane = nullptr);
  ~BackgroundLoop();  // Stop()s if still running

  void Start();

  // Runs `task` (which must be short) on the background thread between two responses, so
  // after the callbacks and trace events of everything already completed, and waits for it.
  // If the loop does not take it within config.timeout_seconds (a long ring), withdraws it
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

  // True when called from any runtime's background thread, where callbacks run: blocking
  // kolo calls must refuse there, since the thread would wait on itself.
  static bool IsBackgroundThread();

  // Closes the queue, tells the controller this rank is leaving, keeps executing responses
  // for ops already submitted until the controller's job-wide Shutdown arrives (or
  // config.timeout_seconds pass), fails what is left with kShutdown, and joins the thread.
  // Returns OK after a clean shutdown, the abort's root cause after an abort, or
  // DeadlineExceeded if the job-wide shutdown did not come in time. Idempotent. Fails with
  // FailedPrecondition, changing nothing, when called from a background thread (a callback).
  Status Stop();

 private:
  static Status ShutDownBeforeCompletion();
  // Marks the calling thread as one where callbacks run (IsBackgroundThread).
  static void SetBackgroundThread(bool on);

  void Run();
  void RunLoop();
  // One pass of the loop's work after a wake-up: control messages, tasks, new requests,
  // rounds, keepalive, the life cycle. Holds loop_mu_.
  void Pass();
  // Waking for rounds. A peer's round message wakes this rank's sleeping thread only while
  // RoundsMustWake: not while the rank is quiet (nothing in flight and FastPath::Quiet). A
  // peer's round can wait for a quiet rank, since nothing a round decides can run without
  // this rank's own op, whose enqueue wakes the thread (or whose caller polls the lane
  // itself); the idle wait's kMaxIdleWait answers it meanwhile. So a quiet rank, between a
  // blocking call's return and its next one or while the application computes, costs its
  // peers no doorbell (a system call on their critical path over shared memory), is not
  // woken by them, and its answer to a round that came early carries its new op: one round
  // instead of two. All three hold loop_mu_.
  bool RoundsMustWake();
  // Lets the peers' round messages wake the sleeping thread: arms a lane that wakes only
  // when armed (false: a message is in already; do not sleep), else unmutes the round
  // sockets in the thread's wait.
  bool WakeForRounds();
  // The opposite, for a lane whose sockets wake the wait: mutes them (a lane that wakes only
  // when armed is disarmed by its next poll).
  void MuteRounds();
  // The step of the loop's life that may come next (the stop notice, the stop deadline, the
  // end after the job-wide Shutdown), checked once per wake-up.
  void AdvanceLife();
  void MoveTo(LoopState next);
  bool serving() const { return Serving(state_); }
  // The control stream (core/loop/background_loop_control.cc).
  void DrainControl();
  void HandleMessage(const ControllerMessage& message);
  void HandleShutdown();
  // Checks `response` is the next in sequence, finds this rank's entries (or zero stand-ins
  // when it joined), learns the cache ids it assigns, and runs it.
  void RunControllerResponse(const Response& response);
  // Executes a decided `response` (the controller's or a round's) over `entries` (this
  // rank's, or stand-ins) and completes them.
  void Execute(const Response& response, const std::vector<TensorEntry*>& entries);
  // The executor of `process_set` (0: the job's), or null when that set has none.
  Executor* ExecutorFor(int process_set) const;
  // A join decided: this rank's join (of the job or of a set) is over; its callers learn the
  // last rank to join, as a job rank.
  void FinishJoin(const Response& response, const std::vector<TensorEntry*>& entries);
  // Removes the response's entries from the queue and completes them with `status` (their own
  // local error where they have one). `skip`: names this rank ran with zeros (not its own).
  void CompleteResponse(const Response& response, const Status& status,
                        const std::vector<std::string>& skip);

  // Asynchronous execution (Executor::Launch), core/loop/background_loop_async.cc.
  struct AsyncOp;
  void Launch(const Response& response, std::vector<TensorEntry*> entries);
  // Runs on the executor's completion thread.
  void OnAsyncDone(const std::shared_ptr<AsyncOp>& op, const Status& status);
  // Loop thread: fails the ops whose device work failed (the first failure aborts the job).
  void DrainAsyncFailures();
  // Waits, up to KOLO_TIMEOUT_SECONDS of the loop's clock (then interrupts the executor and
  // waits as long again), until no launched op is in flight and no completion thread is
  // inside OnAsyncDone; then the loop may end.
  void AwaitInFlight();
  // AwaitInFlight's wait for in_flight_ to reach 0.
  void AwaitLaunchedOps();
  // The end of the loop's life: AwaitInFlight, then kDone.
  void Finish();
  void RememberCacheIds(const Response& response, const std::vector<TensorEntry*>& entries);

  // Fast path I/O (core/loop/background_loop_rounds.cc). Loop thread only.
  bool fast_path_on() const { return fast_ != nullptr; }
  void PollLane(Clock::TimePoint now);
  // Sends, answers and completes rounds and runs what they decided, as far as possible now.
  void StepRounds();
  bool SpinForAnswer() const;
  // Runs what the rounds decided, in order, as far as received. True if anything ran.
  bool RunDecided();
  void RunFastWork(FastPath::Work& work);
  void SendCachedRequests(const std::vector<uint32_t>& ids);
  void SendNewRequests();
  // Sends a batch of requests (nothing if it is empty); a broken stream aborts the job.
  void SendRequests(const WorkerMessage& batch);
  void SendStopNotice();
  // Clock sync: a few Ping/Pong round trips with the controller at start; the one with the
  // shortest round trip gives the offset.
  void SendClockPing();
  // A keepalive Ping every quarter of the timeout while the job runs: the controller tells a
  // rank that fell silent before its stream closed (stopped) from one that died (closed at once).
  void SendKeepalive();
  void HandlePong(const ControllerMessage& pong);
  Request MakeRequest(const TensorEntry& entry);
  // A zero tensor for name `index` of an allreduce this joined rank never submitted.
  TensorEntry* StandIn(const Response& response, size_t index);
  // Sleeps until woken, `deadline` (this loop's clock) or kMaxIdleWait, whichever is first.
  // The loop's own thread only: wakeup_ takes one waiter at a time (a driving caller that
  // must wait sleeps without it, RootCause).
  void Sleep(Clock::TimePoint deadline, const std::vector<int>& fds = {});
  // The root cause of a collective that failed with `local`: waits for the controller's
  // verdict (an Abort naming the lost rank, or the stream breaking: the controller lost) up to
  // min(timeout / 4, 1 s) when a peer closed its connection (a dead peer's control stream
  // closes at once too), timeout / 2 when the exchange timed out (in a ring, the peer that sent
  // nothing may itself be waiting for a stopped rank; keepalive names the stopped one), and
  // returns it; else `local`. Every rank then fails with the same, right message.
  Status RootCause(const Status& local);
  // Job-fatal: fails every pending and later op with `why`. The controller is told unless it
  // is what failed or what reported the error (it then knows already).
  enum class TellController { kYes, kNo };
  void Abort(const Status& why, TellController tell);
  void FailAll(const Status& why);
  // Runs the callback; `response` is the decision it completed with, if any (for the trace).
  void Complete(std::unique_ptr<TensorEntry> entry, const Status& status,
                const Response* response = nullptr);

  // Constant after construction.
  const Config config_;
  TensorQueue* const queue_;
  Wakeup* const wakeup_;
  ControlChannel* const channel_;
  Executor* const executor_;
  DataPlane* const data_plane_;
  OpTracer* const tracer_;
  const Logger logger_;

  const Clock* const clock_;

  // Set by Stop() (any thread), read by the loop.
  std::atomic<bool> stop_requested_{false};

  // Tasks handed to the loop by RunOnLoop.
  struct Task {
    std::function<void()> fn;
    bool done = false;  // guarded by tasks_mu_
  };
  void RunTasks();
  Mutex tasks_mu_;
  CondVar task_done_;  // with tasks_mu_
  std::vector<std::shared_ptr<Task>> tasks_ KOLO_GUARDED_BY(tasks_mu_);
  bool accepting_tasks_ KOLO_GUARDED_BY(tasks_mu_) = false;  // the loop runs

  // Held by whichever thread does the loop's work: the background thread for each pass (not
  // while it sleeps), a blocking caller driving its op (Drive), or RunWithDataPlane's task.
  // "Loop thread" below means the holder: one thread at a time uses the loop's state, the
  // executors and the data plane.
  Mutex loop_mu_;

  // Loop thread only.
  LoopState state_ = LoopState::kRunning;
  Status final_status_;
  Clock::TimePoint stop_deadline_;  // kDraining: leave without the others from then on
  uint64_t last_seq_ = 0;           // the last controller response run
  bool joined_ = false;  // this rank's join is in flight: it contributes zeros to allreduces
  std::vector<int> joined_sets_;  // likewise, of the process sets (other than 0) it joined
  bool HasJoined(int process_set) const;
  // add_process_set / remove_process_set decided: applies it to config_.process_sets.
  void ApplyProcessSetDecision(const Response& response, const std::vector<TensorEntry*>& entries);
  // Zero tensors standing in for allreduces a joined rank never submitted; live while the
  // response that needs them executes.
  std::vector<std::unique_ptr<TensorEntry>> stand_ins_;
  std::vector<std::vector<uint8_t>> stand_in_data_;
  Clock::TimePoint last_keepalive_;
  int clock_samples_ = 0;
  double best_clock_rtt_us_ = 0;
  struct CacheSlot {
    uint32_t id;
    TensorMeta meta;
  };
  std::unordered_map<std::string, CacheSlot> cache_;
  std::vector<TensorEntry*> fresh_entries_;  // SendNewRequests' take, its buffer kept

  // Fast path; loop thread only. Both null without a lane.
  RoundLane* const lane_;
  const std::unique_ptr<FastPath> fast_;
  FastPath::Work fast_work_;   // RunDecided's, its buffers reused from op to op
  bool rounds_muted_ = false;  // MuteRounds muted the round sockets in wakeup_
  // Drive's `done` while a blocking caller runs the passes, else null: StepRounds hands back
  // as soon as the caller's op completed, RootCause polls instead of sleeping on wakeup_.
  const std::function<bool()>* drive_done_ = nullptr;

  // Ops launched asynchronously and not completed yet; decremented by the completion thread.
  std::atomic<int> in_flight_{0};
  Mutex async_mu_;
  struct AsyncFailure {
    std::shared_ptr<AsyncOp> op;
    Status status;
  };
  std::vector<AsyncFailure> async_failures_ KOLO_GUARDED_BY(async_mu_);
  Status shutdown_interrupt_;  // loop thread only: why AwaitInFlight interrupted the executor

  std::thread thread_;        // started by Start(), joined by Stop()
  bool stop_called_ = false;  // owner thread only
};

}  // namespace kolo
