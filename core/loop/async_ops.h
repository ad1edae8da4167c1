// AsyncOps: the background loop's ops that an executor runs asynchronously (Executor::Launch:
// device collectives). The loop launches a response and goes on; the executor's completion
// thread completes it. On success that thread removes the entries and runs their callbacks
// itself (it counts as a kolo thread meanwhile: core/loop/callback_thread.h); on failure it
// hands the op back to the loop (TakeFailures), which aborts the job with the root cause, so
// that every op fails once with the same message. Launched entries are marked in flight
// (TensorEntry::in_flight): their names stay reserved, an abort's FailAll leaves them to their
// executor, and the loop does not end while one is in flight (AwaitInFlight).
//
// Threading: Launch, TakeFailures, ShutdownInterrupt and AwaitInFlight on the loop's thread
// (under BackgroundLoop::loop_mu_); the completion callback on the executor's thread. Its own
// lock for what the two share. The executor, completer, tracer, wakeup and clock must outlive
// it; once AwaitInFlight returned, no completion thread touches it again.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "core/clock.h"
#include "core/executor.h"
#include "core/logging.h"
#include "core/loop/op_completer.h"
#include "core/loop/stand_ins.h"
#include "core/mutex.h"
#include "core/timeline/op_tracer.h"
#include "core/wakeup.h"

namespace kolo {

class AsyncOps {
  struct Op;

 public:
  // `executor` launches (the job's); `tracer` may be null. `timeout_seconds`: how long
  // AwaitInFlight waits before it interrupts the executor (KOLO_TIMEOUT_SECONDS).
  AsyncOps(Executor* executor, const OpCompleter* completer, OpTracer* tracer, Wakeup* wakeup,
           const Clock* clock, double timeout_seconds, Logger logger);

  // Launches `response` over `entries` (this rank's, stand-ins included, which `stand_ins`
  // keeps alive until the op completed) and returns at once. An error is the executor's
  // refusal (job-fatal); the entries are then not in flight.
  Status Launch(const Response& response, const std::vector<TensorEntry*>& entries,
                StandIns stand_ins);

  // An op whose device work failed, handed back to the loop.
  class Failure {
   public:
    const Status& status() const { return status_; }
    // Its entries are no longer in flight: an abort's FailAll now takes them.
    void Reclaim() const;
    // Completes its entries (their own names only) with `status`.
    void Complete(const OpCompleter& completer, const Status& status) const;

   private:
    friend class AsyncOps;
    std::shared_ptr<Op> op_;
    Status status_;
  };
  // The ops that failed since the last call, oldest first. They no longer count as in flight.
  std::vector<Failure> TakeFailures();
  // Whether `status` is the error AwaitInFlight interrupted the executor with at shutdown (an
  // op that fails with it failed because the job ended, not the job because of it).
  bool ShutdownInterrupt(const Status& status) const { return status == shutdown_interrupt_; }

  // The end of the loop's life: until no launched op is in flight, calls `wait(deadline)`,
  // which returns when woken or at `deadline` and hands back what failed (TakeFailures). After
  // KOLO_TIMEOUT_SECONDS of the clock it interrupts the executor and waits as long again; an
  // executor that ignores that aborts the process (its completion would call into a loop that
  // no longer exists). Returns the interrupt's error (DeadlineExceeded), else OK.
  Status AwaitInFlight(const std::function<void(Clock::TimePoint deadline)>& wait);

 private:
  // The executor's completion thread.
  void OnDone(const std::shared_ptr<Op>& op, const Status& status);

  // Constant after construction.
  Executor* const executor_;
  const OpCompleter* const completer_;
  OpTracer* const tracer_;
  Wakeup* const wakeup_;
  const Clock* const clock_;
  const double timeout_seconds_;
  const Logger logger_;

  // Launched and not completed: incremented by Launch, decremented by the completion thread
  // (success) or TakeFailures.
  std::atomic<int> in_flight_{0};
  Mutex mu_;
  std::vector<Failure> failures_ KOLO_GUARDED_BY(mu_);
  Status shutdown_interrupt_;  // loop thread only: why AwaitInFlight interrupted the executor
};

}  // namespace kolo
