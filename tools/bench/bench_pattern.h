// BenchPattern: the input kolo-bench gives each rank and the exactly-known result of reducing
// the inputs of all ranks, for every kolo dtype and reduce op. Values are small integers that
// depend on (rank, element index mod kPeriod) so that every partial sum and product is exact
// even in half and bfloat16 (for jobs of up to 256 ranks; 8-bit sums wrap past 127). Plain
// value type; its methods are const and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kolo/types.h"

namespace kolo::bench {

class BenchPattern {
 public:
  // Elements repeat with this period; it is a multiple of every modulus the values use.
  static constexpr int kPeriod = 60;

  BenchPattern(DataType dtype, ReduceOp op, int rank, int size);

  // Writes this rank's input into `count` elements of the pattern's dtype at `data`.
  void FillInput(void* data, int64_t count) const;
  // Writes a value into every element that differs from the expected result, so that a
  // result the allreduce did not write is counted as wrong.
  void FillPoison(void* data, int64_t count) const;
  // Counts the elements of `data` that are not the expected result. Exact, except that the
  // average of a floating-point dtype may be off by one unit in the last place (a runtime may
  // multiply by 1/n instead of dividing by n).
  int64_t CountWrong(const void* data, int64_t count) const;

  // The input of `rank` and the expected result at element index `j` (mod kPeriod), as
  // exact doubles. Public for tests.
  double InputValue(int rank, int j) const;
  double ExpectedValue(int j) const;

 private:
  bool ElementMatches(const unsigned char* got, int j) const;

  const DataType dtype_;
  const ReduceOp op_;
  const int rank_;
  const int size_;
  const size_t element_size_;
  std::vector<unsigned char> input_;     // one period of this rank's input, encoded
  std::vector<unsigned char> expected_;  // one period of the expected result, encoded
  std::vector<unsigned char> poison_;    // bitwise NOT of expected_
};

// Copies the `period`-byte pattern repeatedly over `total` bytes.
void Tile(const std::vector<unsigned char>& period, void* data, size_t total);

// Encodes / decodes one element of `dtype` (round to nearest even; integers wrap like a cast).
void EncodeValue(DataType dtype, double value, void* out);
double DecodeValue(DataType dtype, const void* in);

}  // namespace kolo::bench
