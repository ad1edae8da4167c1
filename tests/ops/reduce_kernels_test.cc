// Tests of ops/reduce_kernels.h: every dtype and reduce op element by element against a direct
// computation, NaN handling, ScaleCopy and the truncating integer division, for counts
// 0, 1, 7 and 1031 (which cover the vectorised blocks and the scalar tail).
#include "ops/reduce_kernels.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "ops/half.h"

namespace kolo::ops {
namespace {

// Plain storage types and the 16-bit float formats, with their conversion to float.
template <typename T>
struct Native {
  using Storage = T;
  using Compute = T;
  static Compute Widen(T v) { return v; }
  static T Narrow(Compute v) { return v; }
};
struct Half {
  using Storage = uint16_t;
  using Compute = float;
  static float Widen(uint16_t v) { return HalfToFloat(v); }
  static uint16_t Narrow(float v) { return FloatToHalf(v); }
};
struct BFloat {
  using Storage = uint16_t;
  using Compute = float;
  static float Widen(uint16_t v) { return BFloat16ToFloat(v); }
  static uint16_t Narrow(float v) { return FloatToBFloat16(v); }
};

// The direct computation the kernels must match. Integer sum/product wrap modulo 2^bits.
template <typename C>
C Expected(C a, C b, ReduceOp op) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
      case ReduceOp::kProduct:
        return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
      case ReduceOp::kMin:
        return a < b ? a : b;
      case ReduceOp::kMax:
        return a > b ? a : b;
    }
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return a + b;
      case ReduceOp::kProduct:
        return a * b;
      case ReduceOp::kMin:
        return std::fmin(a, b);
      case ReduceOp::kMax:
        return std::fmax(a, b);
    }
  }
  return C{};
}

// Random inputs: the whole range for integers (to exercise wrapping), [-50, 50] for floats.
template <typename Codec>
std::vector<typename Codec::Storage> RandomValues(size_t count, std::mt19937& rng) {
  using C = typename Codec::Compute;
  std::vector<typename Codec::Storage> values(count);
  for (auto& v : values) {
    if constexpr (std::is_integral_v<C>) {
      v = static_cast<C>(std::uniform_int_distribution<int64_t>(
          std::numeric_limits<C>::min(), std::numeric_limits<C>::max())(rng));
    } else {
      v = Codec::Narrow(static_cast<C>(std::uniform_real_distribution<double>(-50, 50)(rng)));
    }
  }
  return values;
}

template <typename Codec>
void CheckReduce(DataType dtype, ReduceOp op, size_t count) {
  std::mt19937 rng(static_cast<uint32_t>(count * 31 + static_cast<int>(op)));
  auto dst = RandomValues<Codec>(count, rng);
  const auto src = RandomValues<Codec>(count, rng);
  const auto before = dst;
  Reduce(dst.data(), src.data(), count, dtype, op);
  for (size_t i = 0; i < count; ++i) {
    const auto expected =
        Codec::Narrow(Expected(Codec::Widen(before[i]), Codec::Widen(src[i]), op));
    INFO(DataTypeName(dtype) << " " << ReduceOpName(op) << " element " << i << " of " << count);
    REQUIRE(dst[i] == expected);
  }
}

TEST_CASE("Reduce matches a direct computation for every dtype and op", "[ops][reduce]") {
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{7}, size_t{1031});
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                               ReduceOp::kProduct);
  CheckReduce<Native<uint8_t>>(DataType::kUInt8, op, count);
  CheckReduce<Native<int8_t>>(DataType::kInt8, op, count);
  CheckReduce<Native<int32_t>>(DataType::kInt32, op, count);
  CheckReduce<Native<int64_t>>(DataType::kInt64, op, count);
  CheckReduce<Half>(DataType::kFloat16, op, count);
  CheckReduce<BFloat>(DataType::kBFloat16, op, count);
  CheckReduce<Native<float>>(DataType::kFloat32, op, count);
  CheckReduce<Native<double>>(DataType::kFloat64, op, count);
}

TEST_CASE("Reduce touches only the first count elements", "[ops][reduce]") {
  std::vector<float> dst(40, 1.0f);
  const std::vector<float> src(40, 2.0f);
  Reduce(dst.data(), src.data(), 33, DataType::kFloat32, ReduceOp::kSum);
  for (size_t i = 0; i < 40; ++i) CHECK(dst[i] == (i < 33 ? 3.0f : 1.0f));
}

TEST_CASE("float16 sums round to nearest even and overflow to infinity", "[ops][reduce]") {
  // 2048 + 1 is a tie between 2048 and 2050 in float16: even mantissa (2048) wins.
  uint16_t dst[2] = {FloatToHalf(2048.0f), FloatToHalf(60000.0f)};
  const uint16_t src[2] = {FloatToHalf(1.0f), FloatToHalf(10000.0f)};
  Reduce(dst, src, 2, DataType::kFloat16, ReduceOp::kSum);
  CHECK(dst[0] == FloatToHalf(2048.0f));
  CHECK(dst[1] == 0x7c00);
}

TEST_CASE("min and max propagate NaN from either side", "[ops][reduce]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const ReduceOp op = GENERATE(ReduceOp::kMin, ReduceOp::kMax);
  std::vector<float> dst = {nan, 1.0f, 2.0f};
  const std::vector<float> src = {1.0f, nan, 3.0f};
  Reduce(dst.data(), src.data(), 3, DataType::kFloat32, op);
  CHECK(std::isnan(dst[0]));
  CHECK(std::isnan(dst[1]));
  CHECK(dst[2] == (op == ReduceOp::kMin ? 2.0f : 3.0f));

  uint16_t half_dst[2] = {0x7e00, FloatToHalf(1.0f)};
  const uint16_t half_src[2] = {FloatToHalf(1.0f), 0x7e00};
  Reduce(half_dst, half_src, 2, DataType::kFloat16, op);
  CHECK(std::isnan(HalfToFloat(half_dst[0])));
  CHECK(std::isnan(HalfToFloat(half_dst[1])));
}

template <typename Codec>
void CheckScale(DataType dtype, size_t count, double factor, bool in_place) {
  std::mt19937 rng(static_cast<uint32_t>(count));
  const auto src = RandomValues<Codec>(count, rng);
  auto dst = in_place ? src : std::vector<typename Codec::Storage>(count);
  ScaleCopy(dst.data(), in_place ? dst.data() : src.data(), count, dtype, factor);
  for (size_t i = 0; i < count; ++i) {
    const double scaled = static_cast<double>(Codec::Widen(src[i])) * factor;
    const auto expected = Codec::Narrow(static_cast<typename Codec::Compute>(scaled));
    INFO(DataTypeName(dtype) << " x " << factor << " element " << i);
    REQUIRE(dst[i] == expected);
  }
}

TEST_CASE("ScaleCopy multiplies floating types in and out of place", "[ops][reduce]") {
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{7}, size_t{1031});
  const double factor = GENERATE(1.0, 0.5, 1.0 / 3.0, -3.0);
  const bool in_place = GENERATE(false, true);
  CheckScale<Half>(DataType::kFloat16, count, factor, in_place);
  CheckScale<BFloat>(DataType::kBFloat16, count, factor, in_place);
  CheckScale<Native<float>>(DataType::kFloat32, count, factor, in_place);
  CheckScale<Native<double>>(DataType::kFloat64, count, factor, in_place);
}

TEST_CASE("ScaleCopy with factor 1 copies integers unchanged", "[ops][reduce]") {
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{7}, size_t{1031});
  std::mt19937 rng(3);
  const auto src = RandomValues<Native<int64_t>>(count, rng);
  std::vector<int64_t> dst(count, 0);
  ScaleCopy(dst.data(), src.data(), count, DataType::kInt64, 1.0);
  CHECK(dst == src);
  ScaleCopy(dst.data(), dst.data(), count, DataType::kInt64, 1.0);
  CHECK(dst == src);
}

TEST_CASE("DivideInPlace truncates toward zero", "[ops][reduce]") {
  std::vector<int8_t> i8 = {-7, 7, -128, 127, -1, 0};
  DivideInPlace(i8.data(), i8.size(), DataType::kInt8, 2);
  CHECK(i8 == std::vector<int8_t>{-3, 3, -64, 63, 0, 0});

  std::vector<uint8_t> u8 = {255, 7, 1};
  DivideInPlace(u8.data(), u8.size(), DataType::kUInt8, 2);
  CHECK(u8 == std::vector<uint8_t>{127, 3, 0});
  u8 = {255, 200};
  DivideInPlace(u8.data(), u8.size(), DataType::kUInt8, 300);  // divisor beyond uint8
  CHECK(u8 == std::vector<uint8_t>{0, 0});

  std::vector<int32_t> i32 = {-10, 10, -11, 11, std::numeric_limits<int32_t>::min()};
  DivideInPlace(i32.data(), i32.size(), DataType::kInt32, 3);
  CHECK(i32 == std::vector<int32_t>{-3, 3, -3, 3, std::numeric_limits<int32_t>::min() / 3});

  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{7}, size_t{1031});
  std::mt19937 rng(5);
  auto i64 = RandomValues<Native<int64_t>>(count, rng);
  const auto before = i64;
  DivideInPlace(i64.data(), count, DataType::kInt64, 7);
  for (size_t i = 0; i < count; ++i) REQUIRE(i64[i] == before[i] / 7);
}

}  // namespace
}  // namespace kolo::ops
