// The model kolo-soak trains: a fixed set of named tensors of mixed sizes and dtypes, and the
// exact values every rank contributes and expects at each step, so that a soak of thousands of
// steps checks every element of every result. Plain functions over plain data; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/types.h"

namespace kolo::soak {

struct SoakTensor {
  std::string name;
  DataType dtype = DataType::kFloat32;  // float32, int32 or float64
  ReduceOp op = ReduceOp::kSum;         // sum or average
  size_t count = 0;                     // elements
};

// `n` tensors: every 20th 256Ki elements, every 5th 16411, the rest small (1 to ~2000);
// every 7th int32, every 11th float64, every 3rd float average.
std::vector<SoakTensor> SoakModel(int n);

// Input element `j` of tensor `t` on `rank` at `step`: (rank + 1) * ((j + t + step) % 13).
double SoakInput(int rank, size_t t, size_t j, int64_t step);
// The allreduced value over `size` ranks with `op` (exact, but for average over a size that
// is not a power of two, which the check allows a relative 1e-5 for).
double SoakExpected(int size, ReduceOp op, size_t t, size_t j, int64_t step);

// Fills / checks `data` (tensor.count elements of tensor.dtype). Check returns the number of
// wrong elements and describes the first in *first_error.
void FillSoakInput(const SoakTensor& tensor, size_t t, int rank, int64_t step, void* data);
size_t CheckSoakResult(const SoakTensor& tensor, size_t t, int size, int64_t step, const void* data,
                       std::string* first_error);

// Resident set size of this process in KiB (from /proc/self/statm); 0 if unreadable.
int64_t ResidentKiB();

}  // namespace kolo::soak
