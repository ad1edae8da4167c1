// The collectives kolo-bench measures (allreduce with any reduce op, allgather, alltoall,
// broadcast, reducescatter with sum), their nccl-tests geometry (the size and count columns, the
// tensors' element counts, the bus-bandwidth factor), and CollectivePattern: each rank's
// input and the exactly-known output of one op, built on BenchPattern's values. No runtime
// needed; plain value types whose methods are const and thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kolo/types.h"
#include "tools/bench/bench_pattern.h"

namespace kolo::bench {

enum class Collective { kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall };

// One entry of `-o`: a collective and, for allreduce and reducescatter, its reduce op.
struct BenchOp {
  Collective collective = Collective::kAllreduce;
  ReduceOp reduce = ReduceOp::kSum;  // ignored by allgather, alltoall and broadcast

  bool operator==(const BenchOp& other) const {
    return collective == other.collective && reduce == other.reduce;
  }
  bool operator!=(const BenchOp& other) const { return !(*this == other); }
};

// "allreduce", "allgather", "broadcast", "reducescatter", "alltoall".
std::string CollectiveName(Collective collective);
// The redop column: the reduce op's nccl-tests name, or "none" for allgather, alltoall and
// broadcast.
std::string RedopName(const BenchOp& op);
bool HasReduceOp(Collective collective);

// The geometry of one row, after nccl-tests (n = number of ranks, e = element size):
//   allreduce:     count = bytes / e;                 input = output = count
//   broadcast:     count = bytes / e;                 one in-place tensor of count
//   allgather:     count = bytes / e / n (per rank);  input = count, output = count * n
//   reducescatter: count = bytes / e / n (per rank);  input = count * n, output = count
//   alltoall:      count = bytes / e / n (per peer);  input = output = count * n
// `bytes` is then recomputed from the rounded count: the largest buffer of the op (the
// allgather output, the reducescatter input, either alltoall buffer), so that
// algbw = bytes / time in every case.
struct BenchShape {
  int64_t bytes = 0;         // the size column
  int64_t count = 0;         // the count column
  int64_t input_count = 0;   // elements of this rank's input tensor
  int64_t output_count = 0;  // elements of this rank's output tensor
};
BenchShape ShapeFor(Collective collective, DataType dtype, int64_t bytes, int size);

// busbw = algbw * factor: 2 (n - 1) / n for allreduce, (n - 1) / n for allgather, alltoall and
// reducescatter, 1 for broadcast.
double BusBandwidthFactor(Collective collective, int size);

// The input this rank gives one op and the output it must get back, exactly:
//   allreduce:     BenchPattern of the reduce op, unchanged
//   allgather:     each rank's input pattern (GatherValue), concatenated in rank order
//   broadcast:     root's input pattern, on every rank (root's tensor must stay as it was)
//   reducescatter: the allreduce expected values of this rank's rows of the input
//   alltoall:      n blocks of count elements; block d of rank r's input is
//                  AlltoallValue(r, d, .), so block s of rank r's output must be
//                  AlltoallValue(s, r, .)
class CollectivePattern {
 public:
  CollectivePattern(const BenchOp& op, DataType dtype, int rank, int size, int root,
                    const BenchShape& shape);

  // Writes this rank's input into `shape.input_count` elements at `data`. For broadcast,
  // `data` is the in-place tensor, and only root's content matters.
  void FillInput(void* data) const;
  // Overwrites every element of the output (`shape.output_count` elements) with a value that
  // differs from the expected one, so that an element the op did not write counts as wrong.
  // Does nothing on broadcast's root, whose tensor is also the input.
  void FillPoison(void* data) const;
  // Counts the output's elements that are not the expected result (see BenchPattern's
  // tolerance for the average of floating-point dtypes).
  int64_t CountWrong(const void* data) const;

  // The input of `rank` for allgather and broadcast at element index `j` (mod kPeriod):
  // small integers, exact in every dtype, that differ between ranks. Public for tests.
  static double GatherValue(DataType dtype, int rank, int j);
  // The alltoall input that `source` sends to `dest` at element index `j` (mod kPeriod) of
  // the block: (3 source + 5 dest + j) mod 11, exact in every dtype. Public for tests.
  static double AlltoallValue(int source, int dest, int j);

 private:
  // A run of `count` output elements whose expected values repeat `period` (kPeriod encoded
  // elements, already rotated to the run's first index); `poison` is its bitwise NOT.
  struct Block {
    int64_t count = 0;
    std::vector<unsigned char> period;
    std::vector<unsigned char> poison;
  };
  void AddBlock(int64_t count, std::vector<unsigned char> period);
  // Encodes value(j) for j in [0, kPeriod).
  std::vector<unsigned char> EncodePeriod(const std::function<double(int)>& value) const;

  const BenchOp op_;
  const DataType dtype_;
  const int rank_;
  const int root_;
  const BenchShape shape_;
  const size_t element_size_;
  const BenchPattern reduce_pattern_;  // the allreduce case, and reducescatter's values
  std::vector<unsigned char> input_;   // one period of this rank's input (allgather, broadcast)
  std::vector<Block> input_blocks_;    // alltoall's input, block by block
  std::vector<Block> expected_;        // the output, block by block (not allreduce)
};

}  // namespace kolo::bench
