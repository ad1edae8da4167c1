// Unit tests of kolo-bench's input pattern: an allreduce simulated in exact arithmetic over
// every dtype, op, world size 1..8 and awkward counts must match the pattern's expected
// result, and the poison must never match it.
#include "tools/bench/bench_pattern.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "tests/support/reference_reduce.h"
#include "tests/support/tensor_values.h"

namespace kolo::bench {
namespace {

const std::vector<ReduceOp> kAllOps = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                       ReduceOp::kMax, ReduceOp::kProduct};

double Combine(ReduceOp op, double a, double b, DataType dtype) {
  return kolo::testing::ReferenceReduce(op, a, b, dtype);
}

// Reduces the ranks' encoded inputs element by element, rounding to the dtype after each step
// like a reduce kernel would.
std::vector<unsigned char> SimulateAllreduce(DataType dtype, ReduceOp op, int size, int64_t count) {
  const size_t width = DataTypeSize(dtype);
  std::vector<std::vector<unsigned char>> inputs(size, std::vector<unsigned char>(count * width));
  for (int r = 0; r < size; ++r)
    BenchPattern(dtype, op, r, size).FillInput(inputs[r].data(), count);
  std::vector<unsigned char> result = inputs[0];
  for (int r = 1; r < size; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      double sum = Combine(op, DecodeValue(dtype, &result[i * width]),
                           DecodeValue(dtype, &inputs[r][i * width]), dtype);
      EncodeValue(dtype, sum, &result[i * width]);
    }
  }
  if (op == ReduceOp::kAverage) {
    for (int64_t i = 0; i < count; ++i) {
      double value = DecodeValue(dtype, &result[i * width]);
      double average = IsFloatingPoint(dtype) ? value / size : std::trunc(value / size);
      EncodeValue(dtype, average, &result[i * width]);
    }
  }
  return result;
}

TEST_CASE("BenchPattern's expected result is what an exact allreduce produces", "[tools][bench]") {
  int size = GENERATE(range(1, 9));
  int64_t count = GENERATE(as<int64_t>{}, 0, 1, 61, 1000);
  for (DataType dtype : kolo::testing::kAllDataTypes) {
    for (ReduceOp op : kAllOps) {
      if (dtype == DataType::kBool && op == ReduceOp::kAverage) continue;  // kolo refuses it
      INFO(DataTypeName(dtype) << " " << ReduceOpName(op) << " size " << size);
      std::vector<unsigned char> result = SimulateAllreduce(dtype, op, size, count);
      BenchPattern pattern(dtype, op, 0, size);
      CHECK(pattern.CountWrong(result.data(), count) == 0);
      pattern.FillPoison(result.data(), count);
      CHECK(pattern.CountWrong(result.data(), count) == count);
    }
  }
}

TEST_CASE("BenchPattern's inputs differ across ranks", "[tools][bench]") {
  for (ReduceOp op : kAllOps) {
    BenchPattern pattern(DataType::kFloat32, op, 0, 4);
    int differing = 0;
    for (int j = 0; j < BenchPattern::kPeriod; ++j) {
      if (pattern.InputValue(0, j) != pattern.InputValue(1, j)) ++differing;
    }
    INFO(ReduceOpName(op));
    CHECK(differing > 0);
  }
}

TEST_CASE("BenchPattern accepts one ulp of error only for floating-point averages",
          "[tools][bench]") {
  BenchPattern average(DataType::kFloat32, ReduceOp::kAverage, 0, 3);
  BenchPattern sum(DataType::kFloat32, ReduceOp::kSum, 0, 3);
  for (BenchPattern* pattern : {&average, &sum}) {
    std::vector<float> values(BenchPattern::kPeriod);
    for (int j = 0; j < BenchPattern::kPeriod; ++j) {
      values[j] = std::nextafter(static_cast<float>(pattern->ExpectedValue(j)), 100.0f);
    }
    int64_t expected_wrong = pattern == &average ? 0 : BenchPattern::kPeriod;
    CHECK(pattern->CountWrong(values.data(), BenchPattern::kPeriod) == expected_wrong);
  }
}

TEST_CASE("EncodeValue and DecodeValue round half and bfloat16 to nearest even", "[tools][bench]") {
  unsigned char bits[2];
  for (double v : {0.0, 1.0, -2.0, 3.0, 256.0, 2048.0, 65504.0, 6.103515625e-05, 5.96e-08}) {
    EncodeValue(DataType::kFloat16, v, bits);
    CHECK(DecodeValue(DataType::kFloat16, bits) == Approx(v).epsilon(1e-3));
  }
  EncodeValue(DataType::kFloat16, 2049.0, bits);  // a tie: rounds to the even 2048
  CHECK(DecodeValue(DataType::kFloat16, bits) == 2048.0);
  EncodeValue(DataType::kFloat16, 1e6, bits);
  CHECK(std::isinf(DecodeValue(DataType::kFloat16, bits)));
  EncodeValue(DataType::kBFloat16, 257.0, bits);  // a tie: rounds to the even 256
  CHECK(DecodeValue(DataType::kBFloat16, bits) == 256.0);
  EncodeValue(DataType::kBFloat16, 259.0, bits);  // a tie: rounds to the even 260
  CHECK(DecodeValue(DataType::kBFloat16, bits) == 260.0);
}

}  // namespace
}  // namespace kolo::bench
