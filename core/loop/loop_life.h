// LoopLife: the background loop's life (core/loop/loop_state.h) and how it ends: the state,
// the stop deadline and the final status; the steps a pass takes towards the end (the stop
// notice, the deadline, the job-wide Shutdown), an abort that fails every pending and later op
// with one root cause (DESIGN.md §5), and the end once no launched op is in flight.
// BackgroundLoop owns it; it calls the loop's collaborators, which must outlive it.
// Threading: the loop thread's (whoever holds BackgroundLoop's loop_mu_), like its owner's pass.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "core/clock.h"
#include "core/data_plane.h"
#include "core/executor.h"
#include "core/logging.h"
#include "core/loop/async_ops.h"
#include "core/loop/controller_session.h"
#include "core/loop/fault.h"
#include "core/loop/loop_state.h"
#include "core/loop/op_completer.h"
#include "core/loop/round_driver.h"
#include "core/tensor_queue.h"
#include "core/wakeup.h"
#include "kolo/options.h"

namespace kolo {

// Bounds the loop thread's sleep so deadlines are checked even when nothing arrives.
inline constexpr std::chrono::milliseconds kMaxIdleWait{200};

// Sleeps until `wakeup` is notified (or one of `fds` is readable), `deadline` (on `clock`) or
// kMaxIdleWait, whichever is first. The loop's own thread only: a Wakeup takes one waiter.
void SleepUntil(Wakeup* wakeup, const Clock* clock, Clock::TimePoint deadline,
                const std::vector<int>& fds = {});

class LoopLife {
 public:
  // The loop's collaborators it acts on; `rounds` may be null (no fast path).
  struct Parts {
    TensorQueue* queue = nullptr;
    Wakeup* wakeup = nullptr;
    Executor* executor = nullptr;
    DataPlane* data_plane = nullptr;
    const Clock* clock = nullptr;
    ControllerSession* session = nullptr;
    AsyncOps* async = nullptr;
    const OpCompleter* completer = nullptr;
    RoundDriver* rounds = nullptr;
  };
  // Reads KOLO_TIMEOUT_SECONDS (the stop deadline) from `options`, which must outlive it.
  LoopLife(const Options& options, Parts parts, Logger logger);

  LoopState state() const { return state_; }
  bool serving() const { return Serving(state_); }
  Clock::TimePoint stop_deadline() const { return stop_deadline_; }  // kDraining: leave then
  // OK, the abort's root cause, or why the shutdown was not clean.
  const Status& final_status() const { return final_status_; }
  // Drive's `done` while a blocking caller runs the passes, else null: a step of the rounds
  // hands back as soon as the caller's op completed, AbortOn polls instead of sleeping.
  const std::function<bool()>* driving() const { return drive_done_; }
  void set_driving(const std::function<bool()>* done) { drive_done_ = done; }

  void MoveTo(LoopState next);
  // The step of the life that may come next (the stop notice, the stop deadline, the end
  // after the job-wide Shutdown), checked once per pass.
  void Advance();
  // The controller's job-wide Shutdown.
  void OnShutdown();
  // Job-fatal, when `fault` is one and the job still runs: fails every pending and later op
  // with its error (after a failed collective, with the root cause the controller names
  // within a bounded wait), and tells the controller unless it is what reported the error.
  void AbortOn(const Fault& fault);
  // Device ops that failed: the first aborts the job; the others fail with it.
  void DrainAsyncFailures();
  // The end of the loop's life: no launched op in flight any more, then kDone.
  void Finish();

 private:
  void FailAll(const Status& why);

  const Options& options_;
  const Parts parts_;
  const Logger logger_;
  LoopState state_ = LoopState::kRunning;
  Status final_status_;
  Clock::TimePoint stop_deadline_;
  const std::function<bool()>* drive_done_ = nullptr;
};

}  // namespace kolo
