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
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (interrupted_.ok()) {
      interrupted_ = ShutdownError("kolo was shut down before this device op completed");
    }
  }
  cv_.notify_all();
  thread_.join();
}

void CompletionQueue::Push(Item item) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::move(item));
  }
  cv_.notify_all();
}

void CompletionQueue::Interrupt(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (interrupted_.ok()) interrupted_ = why;
  }
  cv_.notify_all();
}

size_t CompletionQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return items_.size();
}

void CompletionQueue::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !items_.empty() || stopping_; });
    if (items_.empty()) return;  // stopping, nothing left
    Status status = Await(items_.front(), lock);
    Item item = std::move(items_.front());
    items_.pop_front();
    lock.unlock();
    Finish(item, status);
    lock.lock();
  }
}

Status CompletionQueue::Await(const Item& item, std::unique_lock<std::mutex>& lock) {
  const Clock::TimePoint deadline = config_.clock->Now() + DurationOf(config_.timeout_seconds);
  for (;;) {
    if (!interrupted_.ok()) return interrupted_;
    if (failed_) {  // behind a failure: wait for the loop's verdict (Interrupt)
      cv_.wait(lock, [&] { return !interrupted_.ok(); });
      continue;
    }
    lock.unlock();
    Status failure;
    StatusOr<bool> done = device_->QueryEvent(item.finished);
    if (!done.ok()) {
      failure = done.status().WithContext(item.what);
    } else if (*done) {
      lock.lock();
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
      logger_->error("{}", failure.message());
      if (on_fatal_) on_fatal_(failure);
      lock.lock();
      failed_ = true;
      return failure;
    }
    lock.lock();
    cv_.wait_for(lock, config_.poll_interval, [&] { return !interrupted_.ok(); });
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
