// The reduction of two values as a direct computation in double, for tests that check kolo's
// results against an independent reference. kAverage combines as a sum (the division is the
// caller's, once at the end). Pure; thread-safe.
#pragma once

#include <algorithm>

#include "kolo/types.h"

namespace kolo::testing {

inline double ReferenceReduce(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return a + b;
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kProduct:
      return a * b;
  }
  return a;
}

}  // namespace kolo::testing
