// kolo::Handle: the completion of one asynchronous op, to poll or wait for (Horovod's handles)
// instead of passing a callback. The *_async forms without a callback return one (kolo/kolo.h).
//
// Threading: a Handle is a value (one pointer to a shared, reference-counted state); copies
// refer to the same op. Poll and Synchronize may be called from any thread, on any copy, any
// number of times, concurrently. Copying, assigning and destroying one Handle object from
// several threads at once is not allowed (as for any value type). A Handle that is never
// waited for costs nothing after its op completed and its last copy went: the state goes back
// to a small pool (so the fast path allocates nothing for it) or is freed.
#pragma once

#include "kolo/status.h"

namespace kolo {
namespace internal {
class HandleState;
class HandleAccess;  // kolo's own: makes handles and their completions
}  // namespace internal

class Handle {
 public:
  // A handle of no op: Poll() is true and Synchronize() fails with kInvalidArgument.
  Handle() = default;
  Handle(const Handle& other);
  Handle& operator=(const Handle& other);
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;
  ~Handle();

  // Whether this handle refers to an op.
  bool valid() const { return state_ != nullptr; }
  // Whether the op has completed (Synchronize then returns at once). Never blocks; also from a
  // callback.
  bool Poll() const;
  // Waits until the op completed and returns its status: OK when the result is in the output,
  // else the error that ended it (as a callback would receive). The op's deadlines bound the
  // wait (see kolo/kolo.h). kFailedPrecondition from a kolo callback, where it would wait on
  // itself.
  Status Synchronize() const;
  // As Synchronize(), waiting at most `timeout_seconds` (>= 0): kDeadlineExceeded, naming the
  // timeout, while the op is still running; the handle stays usable.
  Status Synchronize(double timeout_seconds) const;

 private:
  friend class internal::HandleAccess;
  explicit Handle(internal::HandleState* state) : state_(state) {}
  internal::HandleState* state_ = nullptr;
};

// Horovod's names for the same: poll(handle) and synchronize(handle[, timeout]).
inline bool poll(const Handle& handle) {
  return handle.Poll();
}
inline Status synchronize(const Handle& handle) {
  return handle.Synchronize();
}
inline Status synchronize(const Handle& handle, double timeout_seconds) {
  return handle.Synchronize(timeout_seconds);
}

}  // namespace kolo
