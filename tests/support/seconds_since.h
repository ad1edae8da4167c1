// SecondsSince: the seconds of the steady clock since `start`, for tests that bound how long
// something took (a fault reported within its timeout, a refusal within a second).
// Thread-safe.
#pragma once

#include <chrono>

namespace kolo::testing {

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace kolo::testing
