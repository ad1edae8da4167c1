// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with clang
// thread-safety annotations, so that members marked KOLO_GUARDED_BY(mu_) are checked by the
// compiler (see core/thread_annotations.h). Same costs and semantics as the std types; not
// recursive. Every lock of kolo's libraries is one of these.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "core/thread_annotations.h"

namespace kolo {

class KOLO_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() KOLO_ACQUIRE() { mu_.lock(); }
  void Unlock() KOLO_RELEASE() { mu_.unlock(); }
  // True if it took the mutex, which is then held; never blocks.
  bool TryLock() KOLO_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction (std::lock_guard), except between an Unlock()
// and the next Lock() (for a loop that drops the lock around a call that must not hold it).
class KOLO_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) KOLO_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() KOLO_RELEASE() {
    if (locked_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() KOLO_RELEASE() {
    mu_->Unlock();
    locked_ = false;
  }
  void Lock() KOLO_ACQUIRE() {
    mu_->Lock();
    locked_ = true;
  }

 private:
  Mutex* const mu_;
  bool locked_ = true;
};

// A condition variable for a Mutex. Waits take the Mutex the caller holds, which the analysis
// checks; a wait releases it while blocked and holds it again when it returns. A predicate
// runs with the Mutex held, but the analysis checks a lambda as a function of its own, so one
// that reads guarded members says so:
//   MutexLock lock(&mu_);
//   if (!cv_.WaitUntil(&mu_, deadline, [&]() KOLO_REQUIRES(mu_) { return done_; })) ...
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Blocks until `pred()` holds. Only for waits that something else bounds in time (say what
  // at the call site); everything else uses WaitUntil.
  template <typename Predicate>
  void Wait(Mutex* mu, Predicate pred) KOLO_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock, Unchecked(pred));
    lock.release();  // the caller's MutexLock still owns it
  }

  // Blocks until `pred()` holds or `deadline` passes; returns the last value of `pred()`.
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate pred) KOLO_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool result = cv_.wait_until(lock, deadline, Unchecked(pred));
    lock.release();
    return result;
  }

  // Blocks until notified or a spurious wakeup: callers loop on their condition. Only for
  // waits that something else bounds in time (say what at the call site).
  void Wait(Mutex* mu) KOLO_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }

  // Blocks until notified (or a spurious wakeup) or until `deadline`; false if it passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      KOLO_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }

  // WaitUntil(mu, now + timeout) on the steady clock, with or without a predicate.
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) KOLO_REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout, Predicate pred)
      KOLO_REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout, std::move(pred));
  }

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  // std::condition_variable calls the predicate with the mutex held, which the analysis
  // cannot see through the std::unique_lock built on adopt_lock: the wrapper vouches for it.
  template <typename Predicate>
  static auto Unchecked(Predicate& pred) {
    return [&pred]() KOLO_NO_THREAD_SAFETY_ANALYSIS { return pred(); };
  }

  std::condition_variable cv_;
};

}  // namespace kolo
