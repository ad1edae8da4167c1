// The reduction of two values as a direct computation in double, for tests that check kolo's
// results against an independent reference. kAverage combines as a sum (the division is the
// caller's, once at the end); bool reduces logically. Pure; thread-safe.
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

// As above in `dtype`: bool is logical (sum, average and max: or; min and product: and).
inline double ReferenceReduce(ReduceOp op, double a, double b, DataType dtype) {
  if (dtype != DataType::kBool) return ReferenceReduce(op, a, b);
  const bool or_op = op == ReduceOp::kSum || op == ReduceOp::kAverage || op == ReduceOp::kMax;
  return or_op ? (a != 0 || b != 0) : (a != 0 && b != 0);
}

}  // namespace kolo::testing
