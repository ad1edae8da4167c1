// Wakeup: the one place the background thread sleeps. User threads (enqueue, shutdown) and the
// control channel's reader thread call Notify(); the background thread waits with a deadline.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace kolo {

class Wakeup {
 public:
  // Any thread. Never blocks beyond the internal lock.
  void Notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = true;
    }
    cv_.notify_one();
  }

  // Background thread. Returns when notified since the last wait, or at `deadline`.
  void WaitUntil(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [this] { return pending_; });
    pending_ = false;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false;  // guarded by mu_
};

}  // namespace kolo
