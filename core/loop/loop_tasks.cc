#include "core/loop/loop_tasks.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"

namespace kolo {

void LoopTasks::Open() {
  MutexLock lock(&mu_);
  open_ = true;
}

void LoopTasks::Close() {
  MutexLock lock(&mu_);
  open_ = false;
}

Status LoopTasks::Hand(std::function<void()> task, double timeout_seconds) {
  auto item = std::make_shared<Task>();
  item->fn = std::move(task);
  MutexLock lock(&mu_);
  if (!open_) {
    lock.Unlock();
    item->fn();
    return Status::Ok();
  }
  tasks_.push_back(item);
  wakeup_->Notify();
  // Real time: the caller's thread waits, whatever clock the loop keeps its deadlines by.
  const auto limit = std::chrono::duration<double>(timeout_seconds);
  if (done_.WaitFor(&mu_, limit, [&]() KOLO_REQUIRES(mu_) { return item->done; })) {
    return Status::Ok();
  }
  // Withdraw the task if the loop has not taken it, so it never runs after we returned (it
  // may refer to the caller's stack); if the loop has taken it, it is running and short, so
  // this wait is bounded by the task itself.
  auto it = std::find(tasks_.begin(), tasks_.end(), item);
  if (it == tasks_.end()) {
    done_.Wait(&mu_, [&]() KOLO_REQUIRES(mu_) { return item->done; });
    return Status::Ok();
  }
  tasks_.erase(it);
  return DeadlineExceeded("the background thread did not get to the request within " +
                          SecondsText(timeout_seconds) + " (KOLO_TIMEOUT_SECONDS)");
}

bool LoopTasks::Post(std::function<void()> task) {
  auto item = std::make_shared<Task>();
  item->fn = std::move(task);
  MutexLock lock(&mu_);
  if (!open_) return false;
  tasks_.push_back(std::move(item));
  wakeup_->Notify();
  return true;
}

void LoopTasks::RunPending() {
  std::vector<std::shared_ptr<Task>> tasks;
  {
    MutexLock lock(&mu_);
    tasks.swap(tasks_);
  }
  if (tasks.empty()) return;
  for (const auto& task : tasks) task->fn();
  {
    MutexLock lock(&mu_);
    for (const auto& task : tasks) task->done = true;
  }
  done_.NotifyAll();
}

}  // namespace kolo
