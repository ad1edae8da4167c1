// Wakeup: the one place the background thread sleeps. User threads (enqueue, shutdown) and the
// control channel's reader thread call Notify(); the background thread waits with a deadline,
// and also for any of a set of file descriptors (the fast path's round connections) to become
// readable, so one wait covers the queue, the controller and the peers. A thread that does
// the loop's work itself for a while (BackgroundLoop::Drive) Mute()s the file descriptors, so
// that their traffic, which it reads, does not wake the sleeping thread.
// Thread-safe: Notify, Mute and Unmute from any thread; WaitUntil from one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <vector>

namespace kolo {

class Wakeup {
 public:
  // Aborts the process if no eventfd or epoll instance can be made (out of file descriptors
  // at start).
  Wakeup();
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // Any thread. Never blocks. A Notify before a wait makes that wait return at once.
  void Notify();

  // Returns when notified since the last wait, when one of `fds` is readable (or closed) and
  // they are not muted, or at `deadline`. `fds` stay registered between waits (callers pass
  // the same set each time; a different set replaces it).
  void WaitUntil(std::chrono::steady_clock::time_point deadline, const std::vector<int>& fds = {});

  // Until Unmute, waits (one in progress too) do not return for the fds of WaitUntil. Unmute
  // re-arms them: a wait in progress returns at once if one is readable. Calls pair up, from
  // one thread at a time.
  void Mute();
  void Unmute();

 private:
  const int event_fd_;
  const int epoll_fd_;           // event_fd_, and fds_epoll_fd_ unless muted
  const int fds_epoll_fd_;       // the fds of WaitUntil
  std::vector<int> registered_;  // in fds_epoll_fd_; WaitUntil's thread only
  // True between a Notify and the wait that consumes it: later Notify calls skip the write.
  std::atomic<bool> pending_{false};
};

}  // namespace kolo
