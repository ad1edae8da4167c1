// The shared state behind kolo::Handle (kolo/handle.h) and the ways kolo makes handles: one
// small reference-counted object per op, recycled through a process-wide pool so that a
// handle-returning async call allocates nothing beyond its op's own once the pool is warm.
//
// Threading: every function is thread-safe. A state has one reference per Handle copy and one
// for its pending completion; the last Unref returns it to the pool.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <utility>

#include "core/mutex.h"
#include "kolo/handle.h"
#include "kolo/kolo.h"

namespace kolo::internal {

class HandleState {
 public:
  // A fresh state (from the pool when it has one) with `refs` references, not completed.
  static HandleState* Acquire(int refs);

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Gives up one reference; the last one returns the state to the pool.
  void Unref();

  // Records the op's status and wakes the waiters; the first call counts.
  void Complete(const Status& status);
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits (without a deadline when `timeout_seconds` < 0) and returns the status. Drives or
  // polls the op (SetHandleDriver) before it sleeps.
  Status Wait(double timeout_seconds);

 private:
  HandleState() = default;
  std::atomic<int> refs_{0};
  std::atomic<bool> done_{false};
  Mutex mu_;
  CondVar cv_;  // with mu_: status_ was set
  Status status_ KOLO_GUARDED_BY(mu_);
};

// What a handle's wait does before it sleeps: `drive(done)` runs the op on the waiting thread
// where the runtime can (RuntimeImpl::DriveOrSpin: the default runtime's, installed once by
// init()), else polls it, and says whether `done()` turned true. Without one, the wait sleeps
// at once. A plain function, so that no runtime's lifetime hangs on it.
using HandleDriver = bool (*)(const std::function<bool()>& done);
void SetHandleDriver(HandleDriver drive);

class HandleAccess {
 public:
  // Runs `enqueue(callback)`, where `enqueue` is an *_async call taking a Callback, with a
  // callback that completes a new handle, and returns the handle; or enqueue's error, after
  // which nothing refers to the state any more. The callback holds a plain pointer (so
  // std::function stores it without allocating): the reference it stands for is given up
  // when it runs, or here when the op was never queued.
  template <typename Enqueue>
  static StatusOr<Handle> Submit(Enqueue&& enqueue) {
    HandleState* state = HandleState::Acquire(2);  // the Handle's and the completion's
    Handle handle(state);
    Status queued = std::forward<Enqueue>(enqueue)([state](const Status& s) {
      state->Complete(s);
      state->Unref();
    });
    if (!queued.ok()) {
      state->Unref();  // the completion's: the callback never runs
      return queued;
    }
    return handle;
  }

  // For the C API: a new handle of its own (one reference, the caller's), the state behind a
  // Handle, and a Callback that holds a reference of its own while it exists (so it is safe
  // whether or not it ever runs; it allocates, as any capture that counts does).
  static HandleState* New() { return HandleState::Acquire(1); }
  static Handle Of(HandleState* state) {
    state->Ref();
    return Handle(state);
  }
  static Callback CompletionOf(HandleState* state);
};

}  // namespace kolo::internal
