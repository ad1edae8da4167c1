// The background loop's asynchronous ops (Executor::Launch: device collectives). The loop
// launches a response and goes on; the executor's completion thread completes it: on success
// it removes the entries and runs their callbacks itself (it counts as a kolo thread), on
// failure it hands the op back to the loop, which aborts the job with the root cause, so that
// every op fails once with the same message. Names stay in flight until their callback ran,
// and the loop does not end while an op is in flight.
#include <optional>

#include "core/check.h"
#include "core/loop/background_loop.h"

namespace kolo {

struct BackgroundLoop::AsyncOp {
  Response response;
  std::vector<TensorEntry*> entries;  // parallel to response.names; stand-ins included
  std::vector<std::string> zero_names;
  // Zero tensors of a joined rank, alive until the op completed.
  std::vector<std::unique_ptr<TensorEntry>> stand_ins;
  std::vector<std::vector<uint8_t>> stand_in_data;
  std::optional<OpTracer::Phases> phases;  // refers to `entries`
};

void BackgroundLoop::Launch(const Response& response, std::vector<TensorEntry*> entries) {
  auto op = std::make_shared<AsyncOp>();
  op->response = response;
  op->entries = std::move(entries);
  for (const auto& stand_in : stand_ins_) op->zero_names.push_back(stand_in->meta.name);
  op->stand_ins.swap(stand_ins_);
  op->stand_in_data.swap(stand_in_data_);
  for (TensorEntry* e : op->entries) e->in_flight = true;
  if (tracer_ != nullptr && OpTracer::AnyOpened(op->entries)) {
    op->phases.emplace(*tracer_, op->entries);
  }
  ++in_flight_;
  Status launched =
      executor_->Launch(op->response, op->entries, op->phases ? &*op->phases : nullptr,
                        [this, op](const Status& status) { OnAsyncDone(op, status); });
  if (launched.ok()) return;
  for (TensorEntry* e : op->entries) e->in_flight = false;
  --in_flight_;
  Abort(RootCause(launched), TellController::kYes);  // also fails these entries with it
}

// Once the loop can see this op as finished (its failure queued, or in_flight_ down), it may
// end and be destroyed at any moment: so the hand-over and the notice happen under async_mu_,
// which AwaitInFlight takes last, and nothing of the loop is touched after the lock is released.
void BackgroundLoop::OnAsyncDone(const std::shared_ptr<AsyncOp>& op, const Status& status) {
  if (!status.ok()) {
    MutexLock lock(&async_mu_);
    async_failures_.push_back(AsyncFailure{op, status});
    wakeup_->Notify();
    return;
  }
  // Callbacks run here: blocking kolo calls must refuse on this thread too.
  const bool was_background = IsBackgroundThread();
  SetBackgroundThread(true);
  for (TensorEntry* e : op->entries) e->in_flight = false;
  CompleteResponse(op->response, Status::Ok(), op->zero_names);
  SetBackgroundThread(was_background);
  MutexLock lock(&async_mu_);
  --in_flight_;
  wakeup_->Notify();  // AwaitInFlight may be waiting for this
}

void BackgroundLoop::DrainAsyncFailures() {
  std::vector<AsyncFailure> failures;
  {
    MutexLock lock(&async_mu_);
    failures.swap(async_failures_);
  }
  for (const AsyncFailure& failure : failures) {
    const AsyncOp& op = *failure.op;
    for (TensorEntry* e : op.entries) e->in_flight = false;
    if (serving() && !(failure.status == shutdown_interrupt_)) {
      // The first failure aborts the job; its FailAll now includes these entries.
      Abort(RootCause(failure.status), TellController::kYes);
    } else {
      // Failed because the job aborted (with the root cause) or ended with the op in flight.
      CompleteResponse(op.response, serving() ? failure.status : final_status_, op.zero_names);
    }
    --in_flight_;
  }
}

void BackgroundLoop::AwaitInFlight() {
  DrainAsyncFailures();
  if (in_flight_ > 0) AwaitLaunchedOps();
  // The completion thread that finished the last op may still be inside OnAsyncDone's critical
  // section; once it has left it, it touches nothing of this loop again.
  MutexLock lock(&async_mu_);
}

void BackgroundLoop::AwaitLaunchedOps() {
  Clock::TimePoint deadline = clock_->Now() + DurationOf(config_.timeout_seconds);
  bool interrupted = false;
  while (in_flight_ > 0) {
    if (clock_->Now() >= deadline) {
      // An executor that ignores Interrupt would call into a loop that no longer exists.
      KOLO_CHECK(!interrupted) << in_flight_.load() << " launched op(s) still in flight "
                               << SecondsText(config_.timeout_seconds)
                               << " after the executor was interrupted; the process cannot end "
                                  "safely";
      const Status why = DeadlineExceeded(
          "shutdown: " + std::to_string(in_flight_.load()) + " device op(s) still in flight " +
          SecondsText(config_.timeout_seconds) + " (KOLO_TIMEOUT_SECONDS) after the job ended");
      logger_->error("{}", why.message());
      if (final_status_.ok()) final_status_ = why;
      shutdown_interrupt_ = why;
      executor_->Interrupt(why);
      interrupted = true;
      deadline = clock_->Now() + DurationOf(config_.timeout_seconds);
    }
    Sleep(deadline);
    DrainAsyncFailures();
  }
}

void BackgroundLoop::Finish() {
  AwaitInFlight();
  MoveTo(LoopState::kDone);
}

}  // namespace kolo
