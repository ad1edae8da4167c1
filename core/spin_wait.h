// How a kolo thread waits for something another thread, or another rank's process, will soon
// do: it polls for a while, then sleeps (a futex, a condition variable, poll()). Polling pays
// because a sleeping thread takes ~10-30 us to wake on idle cores and milliseconds on a busy
// host, where a woken thread waits for the running process's time slice
// (docs/PERFORMANCE.md, "On a busy machine").
//
// Between two polls a waiter either keeps its core (the CPU's pause instruction) or yields it
// (sched_yield). Keeping it is right where the one it waits for runs on another core: every
// rank of the host has a core of its own, and a peer rank is awaited. Yielding hands the core
// to whatever else is runnable, for a whole time slice on a busy host (a data loader, a second
// job): 570x slower at 4 KiB with two busy processes beside two ranks. It is right only where
// the one awaited may need this very core: more ranks than cores, or another thread of this
// process.
//
// A PollBudget of a waiter that keeps its core counts its time on the core: an interval in
// which it was preempted (a gap between two polls longer than kOffCoreGap) does not use it up,
// so a waiter that another process pushed off its core still polls when it gets the core back,
// instead of going to sleep just as its peer answers. A waiter that yields counts wall time:
// each of its yields may be a time slice off the core, and those must end its wait.
//
// Who waits matters too. A caller driving its own op (BackgroundLoop::Drive) has nothing else
// to do: the application waits for that op. kolo's own thread runs ops while the application
// computes beside it (gradients allreduced during the backward pass), often on the same core
// (kolorun binds a rank to one): every microsecond it polls is taken from that computation.
// So a wait on kolo's thread polls at most kBackgroundPoll before it sleeps, a caller's for its
// whole budget (CallerWaitScope, ThisThreadPollBudget).
//
// Threading: any thread; a PollBudget belongs to the thread that waits.
#pragma once

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace kolo {

// One pause of a polling loop that keeps its core: tells the CPU this is a spin (a sibling
// hyperthread gets the pipeline; less power), without giving the core away.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// What a waiter does between two polls: keep its core or yield it (see above).
enum class BetweenPolls { kKeepCore, kYield };

inline void PauseBetweenPolls(BetweenPolls how) {
  if (how == BetweenPolls::kKeepCore) {
    CpuRelax();
  } else {
    sched_yield();
  }
}

// The time a waiter may poll: on its core only (kKeepCore), or wall time (kYield).
class PollBudget {
 public:
  using Clock = std::chrono::steady_clock;
  // A gap between two calls of Spent() longer than this is taken as time off the core (a
  // preemption): a poll of kolo's takes well under a microsecond, a pass of the loop a few,
  // while the scheduler's time slices are milliseconds.
  static constexpr std::chrono::microseconds kOffCoreGap{200};

  explicit PollBudget(std::chrono::microseconds budget, BetweenPolls how = BetweenPolls::kKeepCore,
                      Clock::time_point (*now)() = &Clock::now)
      : now_(now), on_core_only_(how == BetweenPolls::kKeepCore), left_(budget), last_(now()) {}

  // Call between polls: true once the budget is used up. The clock is read on every call (a
  // vDSO read, tens of ns), which a pause instruction's latency is of the same order as.
  bool Spent() {
    const Clock::time_point now = now_();
    const Clock::duration step = now - last_;
    last_ = now;
    if (!on_core_only_ || step <= kOffCoreGap) left_ -= step;
    return left_ <= Clock::duration::zero();
  }

 private:
  Clock::time_point (*now_)();
  bool on_core_only_;
  Clock::duration left_;
  Clock::time_point last_;
};

// The longest a wait polls on a thread that is not driving its caller's op: about a round trip
// between two ranks on one host and a few chunk steps of a collective, so that a peer that is
// there answers before the wait sleeps, where a peer that is late costs the application's
// threads little.
inline constexpr std::chrono::microseconds kBackgroundPoll{50};

namespace internal {
inline thread_local bool caller_waits = false;
}  // namespace internal

// While one lives, the waits of this thread are a caller's waiting for its own op.
class CallerWaitScope {
 public:
  CallerWaitScope() : was_(internal::caller_waits) { internal::caller_waits = true; }
  ~CallerWaitScope() { internal::caller_waits = was_; }
  CallerWaitScope(const CallerWaitScope&) = delete;
  CallerWaitScope& operator=(const CallerWaitScope&) = delete;

 private:
  const bool was_;
};

// `budget` on a caller's thread (inside a CallerWaitScope), at most kBackgroundPoll elsewhere.
inline std::chrono::microseconds ThisThreadPollBudget(std::chrono::microseconds budget) {
  return internal::caller_waits ? budget : std::min(budget, kBackgroundPoll);
}

// Calls `done` until it returns true or `budget` (on the core, see PollBudget) has passed;
// true if it did. `how`: what to do between two calls. A zero budget checks once. `done` is
// called on the calling thread and must be cheap and thread-safe (an atomic load).
template <typename Done>
bool SpinWait(Done&& done, std::chrono::microseconds budget,
              BetweenPolls how = BetweenPolls::kYield) {
  if (done()) return true;
  if (budget <= std::chrono::microseconds::zero()) return false;
  PollBudget left(budget, how);
  do {
    PauseBetweenPolls(how);
    if (done()) return true;
  } while (!left.Spent());
  return false;
}

}  // namespace kolo
