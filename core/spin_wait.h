// SpinWait: the short poll a thread makes before it sleeps on something another thread will
// soon finish. On these machines a sleeping thread takes ~10-30 us to wake (futex, condition
// variable, eventfd); an op that completes sooner than that is cheaper to watch for. The poll
// yields the core between checks, so a thread that needs it (the background thread doing the
// op, or the application's own) still runs. Callers decide the budget, and only spin where
// every rank of the host has a core (docs/PERFORMANCE.md, "Waiting for a small op").
//
// Threading: any thread; `done` is called on the calling thread and must be cheap and
// thread-safe (an atomic load).
#pragma once

#include <sched.h>

#include <chrono>

namespace kolo {

// Calls `done` until it returns true or `budget` has passed; true if it did. A zero budget
// checks once.
template <typename Done>
bool SpinWait(Done&& done, std::chrono::microseconds budget) {
  if (done()) return true;
  if (budget <= std::chrono::microseconds::zero()) return false;
  const auto until = std::chrono::steady_clock::now() + budget;
  do {
    sched_yield();
    if (done()) return true;
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

}  // namespace kolo
