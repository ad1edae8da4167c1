// Test helper for the ring tests: each rank's input for element i, chosen as small integers so
// that every partial sum, min, max and product is exact in every dtype (bfloat16 included;
// bool gets 0 and 1), and the directly computed reduction of those inputs over n ranks.
#pragma once

#include <algorithm>
#include <cstddef>

#include "kolo/types.h"
#include "tests/support/element_codec.h"
#include "tests/support/reference_reduce.h"

namespace kolo::testing {

inline bool IsSigned(DataType dtype) {
  return dtype != DataType::kUInt8 && dtype != DataType::kUInt16 && dtype != DataType::kBool;
}

inline double RankInput(DataType dtype, ReduceOp op, int rank, size_t i) {
  const size_t r = static_cast<size_t>(rank);
  if (dtype == DataType::kBool) {
    // Mostly false for or (sum, average, max), mostly true for and (min, product).
    const bool marked = (r * 7 + i * 3) % 11 < 2;
    return (op == ReduceOp::kMin || op == ReduceOp::kProduct) ? !marked : marked;
  }
  if (op == ReduceOp::kProduct) {
    // |product| <= 2^3 over any number of ranks: fits int8.
    const double magnitude = (r < 3 && (i + r) % 2 == 0) ? 2 : 1;
    return IsSigned(dtype) && (i + r) % 3 == 0 ? -magnitude : magnitude;
  }
  const double v = static_cast<double>((r * 7 + i * 3) % 11);
  return IsSigned(dtype) ? v - 5 : v;  // sums of 8 ranks stay within [-40, 80]
}

// The reduction over ranks 0..n-1 of RankInput; kAverage is the plain sum (the ring does not
// divide).
inline double ReducedInput(DataType dtype, ReduceOp op, int n, size_t i) {
  double result = RankInput(dtype, op, 0, i);
  for (int rank = 1; rank < n; ++rank) {
    const double v = RankInput(dtype, op, rank, i);
    result = ReferenceReduce(op, result, v, dtype);
  }
  return result;
}

inline ElementBuffer MakeRankInput(DataType dtype, ReduceOp op, int rank, size_t count) {
  ElementBuffer buffer(dtype, count);
  for (size_t i = 0; i < count; ++i) buffer.Set(i, RankInput(dtype, op, rank, i));
  return buffer;
}

inline ElementBuffer MakeReduced(DataType dtype, ReduceOp op, int n, size_t count) {
  ElementBuffer buffer(dtype, count);
  for (size_t i = 0; i < count; ++i) buffer.Set(i, ReducedInput(dtype, op, n, i));
  return buffer;
}

}  // namespace kolo::testing
