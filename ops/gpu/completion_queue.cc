#include "ops/gpu/completion_queue.h"

namespace kolo::gpu {

CompletionQueue::CompletionQueue(DeviceApi* device, const Config& config,
                                 std::function<Status()> health,
                                 std::function<void(const Status&)> on_fatal, Logger logger)
    : device_(device),
      config_(config),
      health_(std::move(health)),
      on_fatal_(std::move(on_fatal)),
      logger_(std::move(logger)),
      thread_([this] { Run(); }) {}

CompletionQueue::~CompletionQueue() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    if (interrupted_.ok()) {
      interrupted_ = ShutdownError("kolo was shut down before this device op completed");
    }
  }
  cv_.NotifyAll();
  thread_.join();
}

void CompletionQueue::Push(Item item) {
  {
    MutexLock lock(&mu_);
    items_.push_back(std::move(item));
  }
  cv_.NotifyAll();
}

void CompletionQueue::Interrupt(const Status& why) {
  {
    MutexLock lock(&mu_);
    if (interrupted_.ok()) interrupted_ = why;
  }
  cv_.NotifyAll();
}

size_t CompletionQueue::pending() const {
  MutexLock lock(&mu_);
  return items_.size();
}

void CompletionQueue::Run() {
  MutexLock lock(&mu_);
  for (;;) {
    // Bounded by the owner: the destructor sets stopping_.
    cv_.Wait(&mu_, [&]() KOLO_REQUIRES(mu_) { return !items_.empty() || stopping_; });
    if (items_.empty()) return;  // stopping, nothing left
    Status status = Await(items_.front());
    Item item = std::move(items_.front());
    items_.pop_front();
    lock.Unlock();
    Finish(item, status);
    lock.Lock();
  }
}

Status CompletionQueue::Await(const Item& item) {
  const Clock::TimePoint deadline = config_.clock->Now() + DurationOf(config_.timeout_seconds);
  for (;;) {
    if (!interrupted_.ok()) return interrupted_;
    if (failed_) {
      // Behind a failure: wait for the loop's verdict. Bounded by the loop, which interrupts
      // the executor when it aborts, and by the destructor.
      cv_.Wait(&mu_, [&]() KOLO_REQUIRES(mu_) { return !interrupted_.ok(); });
      continue;
    }
    mu_.Unlock();
    Status failure;
    StatusOr<bool> done = device_->QueryEvent(item.finished);
    if (!done.ok()) {
      failure = done.status().WithContext(item.what);
    } else if (*done) {
      mu_.Lock();
      return Status::Ok();
    } else if (health_) {
      failure = health_();
      if (!failure.ok()) failure = failure.WithContext(item.what);
    }
    if (failure.ok() && config_.clock->Now() >= deadline) {
      failure = DeadlineExceeded(item.what + ": the device did not finish it within " +
                                 SecondsText(config_.timeout_seconds) + " (KOLO_TIMEOUT_SECONDS)");
    }
    if (!failure.ok()) {
      mu_.Lock();
      // Interrupted meanwhile: the failure is the interruption's own (its abort), not a cause.
      if (!interrupted_.ok()) return interrupted_;
      mu_.Unlock();
      logger_->error("{}", failure.message());
      if (on_fatal_) on_fatal_(failure);
      mu_.Lock();
      failed_ = true;
      return failure;
    }
    mu_.Lock();
    cv_.WaitFor(&mu_, config_.poll_interval,
                [&]() KOLO_REQUIRES(mu_) { return !interrupted_.ok(); });
  }
}

void CompletionQueue::Finish(Item& item, const Status& status) {
  if (status.ok()) ReportPhases(item);
  if (item.done) item.done(status);
  if (item.release) item.release();
}

void CompletionQueue::ReportPhases(const Item& item) {
  if (item.observer == nullptr || item.phases.empty()) return;
  // Events time the phases on the device; anchor them to the host clock at the op's end.
  const Clock::TimePoint now = config_.clock->Now();
  const EventHandle last = item.phases.back().end;
  for (const Phase& phase : item.phases) {
    StatusOr<float> start_ms = device_->ElapsedMs(phase.start, last);
    StatusOr<float> end_ms = device_->ElapsedMs(phase.end, last);
    if (!start_ms.ok() || !end_ms.ok()) continue;  // a phase that did not time: not drawn
    const auto ago = [&](float ms) {
      return std::chrono::duration_cast<Clock::TimePoint::duration>(
          std::chrono::duration<float, std::milli>(ms));
    };
    item.observer->OnPhase(phase.name, now - ago(*start_ms), now - ago(*end_ms));
  }
}

}  // namespace kolo::gpu
