// Unit tests of kolo-bench's collectives (kolo_bench_lib): the nccl-tests geometry of each
// row, the bus-bandwidth factors, and CollectivePattern against collectives simulated here on
// the ranks' encoded inputs.
#include "tools/bench/bench_collective.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "tests/support/tensor_values.h"

namespace kolo::bench {
namespace {

TEST_CASE("ShapeFor follows nccl-tests' size and count columns", "[tools][bench]") {
  // 1000 bytes of float over 3 ranks: 250 elements, 83 per rank.
  BenchShape allreduce = ShapeFor(Collective::kAllreduce, DataType::kFloat32, 1000, 3);
  CHECK(allreduce.count == 250);
  CHECK(allreduce.bytes == 1000);
  CHECK(allreduce.input_count == 250);
  CHECK(allreduce.output_count == 250);

  BenchShape broadcast = ShapeFor(Collective::kBroadcast, DataType::kFloat32, 1002, 3);
  CHECK(broadcast.count == 250);
  CHECK(broadcast.bytes == 1000);
  CHECK(broadcast.output_count == 250);

  BenchShape allgather = ShapeFor(Collective::kAllgather, DataType::kFloat32, 1000, 3);
  CHECK(allgather.count == 83);  // per rank
  CHECK(allgather.input_count == 83);
  CHECK(allgather.output_count == 249);
  CHECK(allgather.bytes == 996);  // the output

  BenchShape reducescatter = ShapeFor(Collective::kReducescatter, DataType::kFloat32, 1000, 3);
  CHECK(reducescatter.count == 83);  // per rank
  CHECK(reducescatter.input_count == 249);
  CHECK(reducescatter.output_count == 83);
  CHECK(reducescatter.bytes == 996);  // the input

  BenchShape alltoall = ShapeFor(Collective::kAlltoall, DataType::kFloat32, 1000, 3);
  CHECK(alltoall.count == 83);  // per peer
  CHECK(alltoall.input_count == 249);
  CHECK(alltoall.output_count == 249);
  CHECK(alltoall.bytes == 996);  // either buffer

  // Fewer elements than ranks: an empty op, as in nccl-tests.
  BenchShape tiny = ShapeFor(Collective::kAllgather, DataType::kFloat64, 8, 4);
  CHECK(tiny.count == 0);
  CHECK(tiny.bytes == 0);
}

TEST_CASE("BusBandwidthFactor is nccl-tests' per collective", "[tools][bench]") {
  CHECK(BusBandwidthFactor(Collective::kAllreduce, 4) == Approx(1.5));
  CHECK(BusBandwidthFactor(Collective::kAllgather, 4) == Approx(0.75));
  CHECK(BusBandwidthFactor(Collective::kReducescatter, 4) == Approx(0.75));
  CHECK(BusBandwidthFactor(Collective::kAlltoall, 4) == Approx(0.75));
  CHECK(BusBandwidthFactor(Collective::kBroadcast, 4) == Approx(1.0));
  CHECK(BusBandwidthFactor(Collective::kAllgather, 1) == Approx(0.0));
}

using Buffer = std::vector<unsigned char>;

struct Simulated {
  std::vector<Buffer> outputs;  // per rank
  std::vector<CollectivePattern> patterns;
};

// Fills every rank's input through its CollectivePattern and computes each rank's output the
// way the collective defines it, on the decoded values.
Simulated Simulate(const BenchOp& op, DataType dtype, int size, int root, int64_t bytes) {
  const size_t e = DataTypeSize(dtype);
  const BenchShape shape = ShapeFor(op.collective, dtype, bytes, size);
  Simulated sim;
  std::vector<Buffer> inputs;
  for (int r = 0; r < size; ++r) {
    sim.patterns.emplace_back(op, dtype, r, size, root, shape);
    inputs.emplace_back(static_cast<size_t>(shape.input_count) * e);
    sim.patterns.back().FillInput(inputs.back().data());
  }
  for (int r = 0; r < size; ++r) {
    Buffer out(static_cast<size_t>(shape.output_count) * e);
    switch (op.collective) {
      case Collective::kAllgather:
        for (int s = 0; s < size; ++s) {
          if (!inputs[s].empty())
            std::memcpy(&out[s * inputs[s].size()], inputs[s].data(), inputs[s].size());
        }
        break;
      case Collective::kBroadcast:
        out = inputs[root];
        break;
      case Collective::kAlltoall: {
        // Block s of rank r's output is block r of rank s's input.
        const size_t block = static_cast<size_t>(shape.count) * e;
        for (int s = 0; s < size; ++s) {
          if (block > 0) std::memcpy(&out[s * block], &inputs[s][r * block], block);
        }
        break;
      }
      case Collective::kAllreduce:
      case Collective::kReducescatter: {
        REQUIRE(op.reduce == ReduceOp::kSum);
        const int64_t first = op.collective == Collective::kAllreduce ? 0 : r * shape.count;
        for (int64_t i = 0; i < shape.output_count; ++i) {
          double sum = 0;
          for (int s = 0; s < size; ++s) sum += DecodeValue(dtype, &inputs[s][(first + i) * e]);
          if (dtype == DataType::kBool) sum = sum != 0;  // bool's sum is or
          EncodeValue(dtype, sum, &out[i * e]);
        }
        break;
      }
    }
    sim.outputs.push_back(std::move(out));
  }
  return sim;
}

TEST_CASE("CollectivePattern expects exactly what each collective computes", "[tools][bench]") {
  const BenchOp op = GENERATE(BenchOp{Collective::kAllgather}, BenchOp{Collective::kBroadcast},
                              BenchOp{Collective::kReducescatter}, BenchOp{Collective::kAlltoall},
                              BenchOp{Collective::kAllreduce, ReduceOp::kSum});
  const int size = GENERATE(1, 3, 4);
  const int root = size - 1;
  // Odd sizes: counts that are not multiples of the period nor of the ranks.
  const int64_t bytes = GENERATE(int64_t{0}, int64_t{8}, int64_t{1000}, int64_t{4104});
  for (DataType dtype : kolo::testing::kAllDataTypes) {
    INFO(CollectiveName(op.collective)
         << " " << DataTypeName(dtype) << " size " << size << " bytes " << bytes);
    Simulated sim = Simulate(op, dtype, size, root, bytes);
    const size_t e = DataTypeSize(dtype);
    for (int r = 0; r < size; ++r) {
      const CollectivePattern& pattern = sim.patterns[r];
      Buffer& out = sim.outputs[r];
      CHECK(pattern.CountWrong(out.data()) == 0);
      const int64_t n = static_cast<int64_t>(out.size() / e);
      if (n == 0) continue;
      // One element off by one: counted.
      Buffer bad = out;
      const size_t at = (static_cast<size_t>(n) / 2) * e;
      EncodeValue(dtype, DecodeValue(dtype, &bad[at]) + 1, &bad[at]);
      CHECK(pattern.CountWrong(bad.data()) == 1);
      // Poison makes every element wrong, except on broadcast's root, which it leaves alone.
      pattern.FillPoison(bad.data());
      const bool untouched = op.collective == Collective::kBroadcast && r == root;
      CHECK(pattern.CountWrong(bad.data()) == (untouched ? 1 : n));
    }
  }
}

TEST_CASE("CollectivePattern tells the ranks' allgather blocks apart", "[tools][bench]") {
  const DataType dtype = DataType::kInt8;
  Simulated sim = Simulate(BenchOp{Collective::kAllgather}, dtype, 4, 0, 400);  // 25 per rank
  Buffer swapped = sim.outputs[0];
  // Swap the blocks of ranks 1 and 2: every element of both is wrong.
  std::swap_ranges(swapped.begin() + 25, swapped.begin() + 50, swapped.begin() + 50);
  CHECK(sim.patterns[0].CountWrong(swapped.data()) == 50);
  for (int r = 0; r < 4; ++r) {
    for (int j = 0; j < BenchPattern::kPeriod; ++j) {
      double v = CollectivePattern::GatherValue(dtype, r, j);
      CHECK(v >= -30);
      CHECK(v <= 30);
    }
  }
  CHECK(CollectivePattern::GatherValue(DataType::kUInt8, 2, 59) >= 0);
}

TEST_CASE("CollectivePattern tells alltoall's sources and destinations apart", "[tools][bench]") {
  const DataType dtype = GENERATE(DataType::kInt8, DataType::kBFloat16);
  const BenchOp op{Collective::kAlltoall};
  Simulated sim = Simulate(op, dtype, 4, 0, 400 * DataTypeSize(dtype));  // 100 per peer
  const size_t e = DataTypeSize(dtype);
  const size_t block = 100 * e;
  // Rank 1's output with the blocks from ranks 0 and 3 swapped: all 200 elements are wrong.
  Buffer swapped = sim.outputs[1];
  std::swap_ranges(swapped.begin(), swapped.begin() + block, swapped.begin() + 3 * block);
  CHECK(sim.patterns[1].CountWrong(swapped.data()) == 200);
  // Rank 1 given what rank 2 should get (every source's block for rank 2): all wrong.
  CHECK(sim.patterns[1].CountWrong(sim.outputs[2].data()) == 400);
  // One corrupted element in the block from rank 3.
  Buffer bad = sim.outputs[1];
  EncodeValue(dtype, DecodeValue(dtype, &bad[3 * block + 7 * e]) + 11, &bad[3 * block + 7 * e]);
  CHECK(sim.patterns[1].CountWrong(bad.data()) == 1);
  // Rank r's input block for d holds AlltoallValue(r, d, j): small non-negative integers.
  std::vector<unsigned char> input(400 * e);
  sim.patterns[2].FillInput(input.data());
  for (int d = 0; d < 4; ++d) {
    for (int j = 0; j < 100; ++j) {
      double v = DecodeValue(dtype, &input[(d * 100 + j) * e]);
      CHECK(v == CollectivePattern::AlltoallValue(2, d, j % BenchPattern::kPeriod));
      CHECK(v >= 0);
      CHECK(v <= 10);
    }
  }
}

}  // namespace
}  // namespace kolo::bench
