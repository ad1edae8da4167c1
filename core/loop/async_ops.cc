#include "core/loop/async_ops.h"

#include <optional>
#include <string>

#include "core/check.h"
#include "core/loop/callback_thread.h"

namespace kolo {

struct AsyncOps::Op {
  Response response;
  std::vector<TensorEntry*> entries;  // parallel to response.names; stand-ins included
  std::vector<std::string> zero_names;
  StandIns stand_ins;  // zero tensors of a joined rank, alive until the op completed
  std::optional<OpTracer::Phases> phases;  // refers to `entries`
};

AsyncOps::AsyncOps(Executor* executor, const OpCompleter* completer, OpTracer* tracer,
                   Wakeup* wakeup, const Clock* clock, double timeout_seconds, Logger logger)
    : executor_(executor),
      completer_(completer),
      tracer_(tracer),
      wakeup_(wakeup),
      clock_(clock),
      timeout_seconds_(timeout_seconds),
      logger_(std::move(logger)) {}

Status AsyncOps::Launch(const Response& response, const std::vector<TensorEntry*>& entries,
                        StandIns stand_ins) {
  auto op = std::make_shared<Op>();
  op->response = response;
  op->entries = entries;
  op->zero_names = stand_ins.Names();
  op->stand_ins = std::move(stand_ins);
  for (TensorEntry* e : op->entries) e->in_flight = true;
  if (tracer_ != nullptr && OpTracer::AnyOpened(op->entries)) {
    op->phases.emplace(*tracer_, op->entries);
  }
  ++in_flight_;
  Status launched =
      executor_->Launch(op->response, op->entries, op->phases ? &*op->phases : nullptr,
                        [this, op](const Status& status) { OnDone(op, status); });
  if (launched.ok()) return launched;
  for (TensorEntry* e : op->entries) e->in_flight = false;
  --in_flight_;
  return launched;
}

// Once the loop can see this op as finished (its failure queued, or in_flight_ down), it may
// end and be destroyed at any moment: so the hand-over and the notice happen under mu_, which
// AwaitInFlight takes last, and nothing of this object is touched after the lock is released.
void AsyncOps::OnDone(const std::shared_ptr<Op>& op, const Status& status) {
  if (!status.ok()) {
    MutexLock lock(&mu_);
    Failure failure;
    failure.op_ = op;
    failure.status_ = status;
    failures_.push_back(std::move(failure));
    wakeup_->Notify();
    return;
  }
  {
    // Callbacks run here: blocking kolo calls must refuse on this thread too.
    CallbackThreadScope callbacks;
    for (TensorEntry* e : op->entries) e->in_flight = false;
    completer_->CompleteResponse(op->response, Status::Ok(), op->zero_names);
  }
  MutexLock lock(&mu_);
  --in_flight_;
  wakeup_->Notify();  // AwaitInFlight may be waiting for this
}

std::vector<AsyncOps::Failure> AsyncOps::TakeFailures() {
  std::vector<Failure> failures;
  MutexLock lock(&mu_);
  failures.swap(failures_);
  in_flight_ -= static_cast<int>(failures.size());
  return failures;
}

void AsyncOps::Failure::Reclaim() const {
  for (TensorEntry* e : op_->entries) e->in_flight = false;
}

void AsyncOps::Failure::Complete(const OpCompleter& completer, const Status& status) const {
  completer.CompleteResponse(op_->response, status, op_->zero_names);
}

Status AsyncOps::AwaitInFlight(const std::function<void(Clock::TimePoint deadline)>& wait) {
  Status interrupt;
  if (in_flight_ > 0) {
    Clock::TimePoint deadline = clock_->Now() + DurationOf(timeout_seconds_);
    while (in_flight_ > 0) {
      if (clock_->Now() >= deadline) {
        // An executor that ignores Interrupt would call into a loop that no longer exists.
        KOLO_CHECK(interrupt.ok())
            << in_flight_.load() << " launched op(s) still in flight "
            << SecondsText(timeout_seconds_)
            << " after the executor was interrupted; the process cannot end safely";
        interrupt = DeadlineExceeded(
            "shutdown: " + std::to_string(in_flight_.load()) + " device op(s) still in flight " +
            SecondsText(timeout_seconds_) + " (KOLO_TIMEOUT_SECONDS) after the job ended");
        logger_->error("{}", interrupt.message());
        shutdown_interrupt_ = interrupt;
        executor_->Interrupt(interrupt);
        deadline = clock_->Now() + DurationOf(timeout_seconds_);
      }
      wait(deadline);
    }
  }
  // The completion thread that finished the last op may still be inside OnDone's critical
  // section; once it has left it, it touches nothing of this object again.
  MutexLock lock(&mu_);
  return interrupt;
}

}  // namespace kolo
