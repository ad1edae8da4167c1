// kolo::Handle and its pooled state (runtime/handle_state.h).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/loop/background_loop.h"
#include "runtime/handle_state.h"

namespace kolo {
namespace internal {
namespace {

// States whose last reference went, for reuse. Never destroyed, so a callback running during
// static destruction still finds it; the states it holds stay reachable.
constexpr size_t kPoolLimit = 1024;

std::atomic<HandleDriver> handle_driver{nullptr};  // SetHandleDriver

struct Pool {
  Mutex mu;
  std::vector<HandleState*> free KOLO_GUARDED_BY(mu);
};

Pool& ThePool() {
  static Pool* pool = new Pool();
  return *pool;
}

// A copyable reference to a state, for the C API's callbacks.
class StateRef {
 public:
  explicit StateRef(HandleState* state) : state_(state) { state_->Ref(); }
  StateRef(const StateRef& other) : state_(other.state_) { state_->Ref(); }
  StateRef& operator=(const StateRef&) = delete;
  ~StateRef() { state_->Unref(); }
  HandleState* get() const { return state_; }

 private:
  HandleState* const state_;
};

}  // namespace

HandleState* HandleState::Acquire(int refs) {
  HandleState* state = nullptr;
  {
    Pool& pool = ThePool();
    MutexLock lock(&pool.mu);
    if (!pool.free.empty()) {
      state = pool.free.back();
      pool.free.pop_back();
    }
  }
  if (state == nullptr) state = new HandleState();
  state->refs_.store(refs, std::memory_order_relaxed);
  return state;
}

void HandleState::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last reference: nobody else can see this state. Reset it for its next op.
  {
    MutexLock lock(&mu_);
    status_ = Status::Ok();
  }
  done_.store(false, std::memory_order_relaxed);
  Pool& pool = ThePool();
  {
    MutexLock lock(&pool.mu);
    if (pool.free.size() < kPoolLimit) {
      pool.free.push_back(this);
      return;
    }
  }
  delete this;
}

void HandleState::Complete(const Status& status) {
  MutexLock lock(&mu_);
  if (done_.load(std::memory_order_relaxed)) return;
  status_ = status;
  done_.store(true, std::memory_order_release);
  cv_.NotifyAll();
}

void SetHandleDriver(HandleDriver drive) {
  handle_driver.store(drive, std::memory_order_release);
}

Status HandleState::Wait(double timeout_seconds) {
  if (timeout_seconds != 0) {
    // Under a busy host a hand-off to kolo's thread costs a time slice: a synchronize() on an
    // op nothing else is running drives it here (docs/PERFORMANCE.md, "On a busy machine").
    if (HandleDriver drive = handle_driver.load(std::memory_order_acquire)) {
      drive([&] { return done(); });
    }
  }
  MutexLock lock(&mu_);
  auto is_done = [&]() KOLO_REQUIRES(mu_) { return done_.load(std::memory_order_relaxed); };
  if (timeout_seconds < 0) {
    // Bounded by the op's own deadlines: every failure completes it (kolo/kolo.h).
    cv_.Wait(&mu_, is_done);
  } else if (!cv_.WaitFor(&mu_, std::chrono::duration<double>(timeout_seconds), is_done)) {
    return DeadlineExceeded("synchronize(): the op did not complete within " +
                            std::to_string(timeout_seconds) + " s; it is still running");
  }
  return status_;
}

Callback HandleAccess::CompletionOf(HandleState* state) {
  return [ref = StateRef(state)](const Status& s) { ref.get()->Complete(s); };
}

}  // namespace internal

Handle::Handle(const Handle& other) : state_(other.state_) {
  if (state_ != nullptr) state_->Ref();
}

Handle& Handle::operator=(const Handle& other) {
  if (other.state_ != nullptr) other.state_->Ref();
  if (state_ != nullptr) state_->Unref();
  state_ = other.state_;
  return *this;
}

Handle::Handle(Handle&& other) noexcept : state_(other.state_) {
  other.state_ = nullptr;
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) state_->Unref();
    state_ = other.state_;
    other.state_ = nullptr;
  }
  return *this;
}

Handle::~Handle() {
  if (state_ != nullptr) state_->Unref();
}

bool Handle::Poll() const {
  return state_ == nullptr || state_->done();
}

Status Handle::Synchronize() const {
  return Synchronize(-1);
}

Status Handle::Synchronize(double timeout_seconds) const {
  if (state_ == nullptr) return InvalidArgument("synchronize(): the handle refers to no op");
  if (BackgroundLoop::IsBackgroundThread()) {  // even when done: the same rule every time
    return FailedPrecondition(
        "synchronize() was called from a kolo callback, where it would wait on itself; use "
        "poll() there, or wait from your own thread");
  }
  return state_->Wait(timeout_seconds);
}

}  // namespace kolo
