// Wakeup: the one place the background thread sleeps. User threads (enqueue, shutdown) and the
// control channel's reader thread call Notify(); the background thread waits with a deadline,
// and also for any of a set of file descriptors (the fast path's round connections) to become
// readable, so one wait covers the queue, the controller and the peers.
// Thread-safe: Notify from any thread; WaitUntil from one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <vector>

namespace kolo {

class Wakeup {
 public:
  Wakeup();  // aborts the process if no eventfd can be made (out of file descriptors at start)
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // Any thread. Never blocks. A Notify before a wait makes that wait return at once.
  void Notify();

  // Returns when notified since the last wait, when one of `fds` is readable (or closed), or at
  // `deadline`.
  void WaitUntil(std::chrono::steady_clock::time_point deadline, const std::vector<int>& fds = {});

 private:
  const int event_fd_;
  // True between a Notify and the wait that consumes it: later Notify calls skip the write.
  std::atomic<bool> pending_{false};
};

}  // namespace kolo
