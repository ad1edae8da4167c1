// LoopTasks: short tasks handed to the background loop's thread (BackgroundLoop::RunOnLoop),
// which runs them between two responses, so after the callbacks and trace events of
// everything already completed. The caller waits for its task with a deadline and withdraws it
// when the loop does not take it in time, so a task never runs after Hand returned.
//
// Threading: Hand from any thread but the loop's, Post from any thread; Open, Close and
// RunPending from the loop's owner and the loop's thread. Its own lock, never held while a task
// runs.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/mutex.h"
#include "core/wakeup.h"
#include "kolo/status.h"

namespace kolo {

class LoopTasks {
 public:
  // `wakeup` (the loop's) must outlive this object.
  explicit LoopTasks(Wakeup* wakeup) : wakeup_(wakeup) {}

  // From now on Hand queues tasks for RunPending (the loop runs).
  void Open();
  // From now on Hand runs tasks on its caller's thread (the loop's thread ends); tasks queued
  // already still run at the next RunPending.
  void Close();

  // Queues `task`, wakes the loop and waits, up to `timeout_seconds` of real time, until it
  // ran. Runs it on the calling thread when closed. When the loop does not take it in time,
  // withdraws it and fails with DeadlineExceeded naming KOLO_TIMEOUT_SECONDS; a task the loop
  // has taken already is waited for (it is short).
  Status Hand(std::function<void()> task, double timeout_seconds);
  // Queues `task` for the next RunPending and wakes the loop, without waiting for it (a task
  // that must not wait for the loop: BackgroundLoop::AbortJob). When closed, drops it and
  // returns false: the loop's thread has ended.
  bool Post(std::function<void()> task);

  // The loop's thread: runs the tasks queued so far, in order, and releases their callers.
  void RunPending();

 private:
  struct Task {
    std::function<void()> fn;
    bool done = false;  // guarded by mu_
  };

  Wakeup* const wakeup_;
  Mutex mu_;
  CondVar done_;  // with mu_: tasks ran
  std::vector<std::shared_ptr<Task>> tasks_ KOLO_GUARDED_BY(mu_);
  bool open_ KOLO_GUARDED_BY(mu_) = false;
};

}  // namespace kolo
