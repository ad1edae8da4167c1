// Test values for collective checks: deterministic per (rank, element) inputs in every dtype,
// chosen so sums and products stay exact, and the directly computed expected result.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/types.h"

namespace kolo::testing {

// Every dtype kolo reduces, for sweeps.
inline constexpr DataType kAllDataTypes[] = {
    DataType::kUInt8,   DataType::kInt8,    DataType::kUInt16,  DataType::kInt16,
    DataType::kInt32,   DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
    DataType::kFloat32, DataType::kFloat64, DataType::kBool};

// The dtypes NCCL has (every kolo dtype but uint16, int16 and bool), for the GPU path's sweeps.
inline constexpr DataType kNcclDataTypes[] = {
    DataType::kUInt8,   DataType::kInt8,     DataType::kInt32,   DataType::kInt64,
    DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};

// Every reduce op, for sweeps.
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                       ReduceOp::kMax, ReduceOp::kProduct};

// Whether kolo reduces `dtype` with `op`: every pair but bool's average, which enqueue refuses.
inline bool HasReduceOp(DataType dtype, ReduceOp op) {
  return !(dtype == DataType::kBool && op == ReduceOp::kAverage);
}

// A host tensor of `count` elements over `bytes` (which must outlive the view).
inline TensorView View(std::vector<uint8_t>& bytes, DataType dtype, int64_t count) {
  return TensorView{bytes.data(), dtype, {count}, Device::Cpu()};
}

// Input value of element i on rank r (small integers; in {1, 2} for products; for bool, 0 or
// 1, mostly 0 for or (sum, average, max) and mostly 1 for and (min, product)).
double InputValue(int rank, int64_t i, ReduceOp op, DataType dtype);

// Bytes of `count` elements of `dtype` holding InputValue(rank, i, op, dtype).
std::vector<uint8_t> MakeInput(DataType dtype, int64_t count, int rank, ReduceOp op);

// The allreduce result of MakeInput over `size` ranks, computed directly in double, for
// element i (integer average truncates toward zero).
double ExpectedAllreduce(int size, int64_t i, ReduceOp op, DataType dtype);

// Element i of `bytes` as double.
double ReadElement(const std::vector<uint8_t>& bytes, DataType dtype, int64_t i);

// "" when every element matches within the dtype's tolerance, else the first mismatch.
std::string CheckAllreduce(const std::vector<uint8_t>& output, DataType dtype, int64_t count,
                           int size, ReduceOp op);

}  // namespace kolo::testing
