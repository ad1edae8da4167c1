// Tests of ops/reduce_kernels.h: every dtype and reduce op element by element against a direct
// computation, NaN handling, bool's logic, ScaleCopy (integers: truncated, saturated) and the
// truncating integer division, for counts
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

// The direct computation the kernels must match. Integer sum/product wrap modulo 2^bits
// (computed modulo 2^64, then cut to C's bits).
template <typename C>
C Expected(C a, C b, ReduceOp op) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    const uint64_t ua = static_cast<U>(a);
    const uint64_t ub = static_cast<U>(b);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return static_cast<C>(static_cast<U>(ua + ub));
      case ReduceOp::kProduct:
        return static_cast<C>(static_cast<U>(ua * ub));
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
  // ReduceInto: the same values, into a third buffer, leaving both operands as they were.
  std::vector<typename Codec::Storage> into(count);
  ReduceInto(into.data(), before.data(), src.data(), count, dtype, op);
  // ReduceReversed: the same values, landing on the second operand.
  auto onto = src;
  ReduceReversed(onto.data(), before.data(), count, dtype, op);
  for (size_t i = 0; i < count; ++i) {
    const auto expected =
        Codec::Narrow(Expected(Codec::Widen(before[i]), Codec::Widen(src[i]), op));
    INFO(DataTypeName(dtype) << " " << ReduceOpName(op) << " element " << i << " of " << count);
    REQUIRE(dst[i] == expected);
    REQUIRE(into[i] == expected);
    REQUIRE(onto[i] == expected);
  }
}

TEST_CASE("Reduce matches a direct computation for every dtype and op", "[ops][reduce]") {
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{7}, size_t{1031});
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                               ReduceOp::kProduct);
  CheckReduce<Native<uint8_t>>(DataType::kUInt8, op, count);
  CheckReduce<Native<int8_t>>(DataType::kInt8, op, count);
  CheckReduce<Native<uint16_t>>(DataType::kUInt16, op, count);
  CheckReduce<Native<int16_t>>(DataType::kInt16, op, count);
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

  // Two NaNs: the second operand's wins, so the order matters, and ReduceReversed keeps it.
  const uint32_t first = 0x7fc00001u, second = 0x7fc00002u;  // float NaNs, as bits
  uint32_t onto = second, into = 0;
  ReduceReversed(&onto, &first, 1, DataType::kFloat32, op);
  ReduceInto(&into, &first, &second, 1, DataType::kFloat32, op);
  CHECK(into == second);
  CHECK(onto == into);

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
    // Horovod's ScaleBuffer: the factor rounded to the compute type, one product in it.
    const auto f = static_cast<typename Codec::Compute>(factor);
    const auto expected = Codec::Narrow(f * Codec::Widen(src[i]));
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

TEST_CASE("ScaleCopy scales float32 in float32, as Horovod, not in double", "[ops][reduce]") {
  // 0.7f * float(0.3) in float is 0x3e570a3e; the product in double, rounded once, would be
  // 0x3e570a3d. Horovod casts the factor to float and multiplies in float.
  const float x = 0.7f;
  float out = 0;
  ScaleCopy(&out, &x, 1, DataType::kFloat32, 0.3);
  CHECK(out == 0.7f * static_cast<float>(0.3));
  CHECK(out != static_cast<float>(static_cast<double>(x) * 0.3));
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

TEST_CASE("uint16 and int16 products wrap instead of overflowing int", "[ops][reduce]") {
  // 65535 * 65535 overflows the int that uint16 promotes to; modulo 2^16 it is 1.
  std::vector<uint16_t> u = {65535, 300, 256};
  const std::vector<uint16_t> u_src = {65535, 300, 256};
  Reduce(u.data(), u_src.data(), u.size(), DataType::kUInt16, ReduceOp::kProduct);
  CHECK(u == std::vector<uint16_t>{1, static_cast<uint16_t>(90000 % 65536), 0});
  std::vector<int16_t> i = {-32768, 32767, 200};
  const std::vector<int16_t> i_src = {-1, 1, 200};
  Reduce(i.data(), i_src.data(), i.size(), DataType::kInt16, ReduceOp::kSum);
  CHECK(i == std::vector<int16_t>{32767, -32768, 400});
}

TEST_CASE("bool reduces as logical or (sum, average, max) and and (min, product)",
          "[ops][reduce]") {
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{7}, size_t{1031});
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                               ReduceOp::kProduct);
  const bool is_or = op == ReduceOp::kSum || op == ReduceOp::kAverage || op == ReduceOp::kMax;
  // Bytes other than 0 and 1 (a C bool written through another type) count as true.
  const uint8_t kBytes[] = {0, 1, 2, 255};
  std::vector<uint8_t> dst(count), src(count);
  for (size_t i = 0; i < count; ++i) {
    dst[i] = kBytes[i % 4];
    src[i] = kBytes[(i / 4) % 4];
  }
  const auto before = dst;
  Reduce(dst.data(), src.data(), count, DataType::kBool, op);
  std::vector<uint8_t> into(count);
  ReduceInto(into.data(), before.data(), src.data(), count, DataType::kBool, op);
  std::vector<uint8_t> onto = src;
  ReduceReversed(onto.data(), before.data(), count, DataType::kBool, op);
  for (size_t i = 0; i < count; ++i) {
    const bool a = before[i] != 0;
    const bool b = src[i] != 0;
    INFO(ReduceOpName(op) << " of " << int{before[i]} << " and " << int{src[i]});
    REQUIRE(dst[i] == ((is_or ? (a || b) : (a && b)) ? 1 : 0));
    REQUIRE(into[i] == dst[i]);
    REQUIRE(onto[i] == dst[i]);
  }
}

// What ScaleCopy must give for an integer: the product in double truncated toward zero, held
// to [min, max] (computed in long double, which holds every int64 exactly on x86).
template <typename T>
T TruncatedProduct(T v, double factor) {
  const long double x = std::trunc(static_cast<long double>(static_cast<double>(v) * factor));
  if (x >= static_cast<long double>(std::numeric_limits<T>::max())) {
    return std::numeric_limits<T>::max();
  }
  if (x <= static_cast<long double>(std::numeric_limits<T>::min())) {
    return std::numeric_limits<T>::min();
  }
  return static_cast<T>(x);
}

template <typename T>
void CheckIntegerScale(DataType dtype, size_t count, double factor, bool in_place) {
  std::mt19937 rng(static_cast<uint32_t>(count + 17));
  const auto src = RandomValues<Native<T>>(count, rng);
  auto dst = in_place ? src : std::vector<T>(count);
  ScaleCopy(dst.data(), in_place ? dst.data() : src.data(), count, dtype, factor);
  for (size_t i = 0; i < count; ++i) {
    INFO(DataTypeName(dtype) << " " << static_cast<int64_t>(src[i]) << " x " << factor);
    REQUIRE(dst[i] == TruncatedProduct(src[i], factor));
  }
}

TEST_CASE("ScaleCopy scales integers in double, truncating toward zero and saturating",
          "[ops][reduce]") {
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{7}, size_t{1031});
  const double factor = GENERATE(0.5, 1.0 / 3.0, -3.0, 2.5, 1e30);
  const bool in_place = GENERATE(false, true);
  CheckIntegerScale<uint8_t>(DataType::kUInt8, count, factor, in_place);
  CheckIntegerScale<int8_t>(DataType::kInt8, count, factor, in_place);
  CheckIntegerScale<uint16_t>(DataType::kUInt16, count, factor, in_place);
  CheckIntegerScale<int16_t>(DataType::kInt16, count, factor, in_place);
  CheckIntegerScale<int32_t>(DataType::kInt32, count, factor, in_place);
  CheckIntegerScale<int64_t>(DataType::kInt64, count, factor, in_place);
}

TEST_CASE("ScaleCopy of integers: Horovod's truncation, and the range's ends", "[ops][reduce]") {
  std::vector<int32_t> i32 = {7, -7, 1, -1, 2147483647, -2147483647 - 1};
  ScaleCopy(i32.data(), i32.data(), i32.size(), DataType::kInt32, 0.5);
  CHECK(i32 == std::vector<int32_t>{3, -3, 0, 0, 1073741823, -1073741824});
  std::vector<int8_t> i8 = {100, -100, 3};
  ScaleCopy(i8.data(), i8.data(), i8.size(), DataType::kInt8, 2.0);
  CHECK(i8 == std::vector<int8_t>{127, -128, 6});  // saturated, not wrapped
  std::vector<uint8_t> u8 = {5, 200};
  ScaleCopy(u8.data(), u8.data(), u8.size(), DataType::kUInt8, -1.0);
  CHECK(u8 == std::vector<uint8_t>{0, 0});
  const int64_t big = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> i64 = {big, -big - 1, int64_t{1} << 61, int64_t{1} << 60};
  ScaleCopy(i64.data(), i64.data(), i64.size(), DataType::kInt64, 4.0);
  CHECK(i64 == std::vector<int64_t>{big, -big - 1, big, int64_t{1} << 62});
  std::vector<uint8_t> flags = {0, 1, 1};
  std::vector<uint8_t> copy(3, 7);
  ScaleCopy(copy.data(), flags.data(), flags.size(), DataType::kBool, 1.0);
  CHECK(copy == flags);
}

TEST_CASE("ScaleDivideInPlace scales and divides integers as Horovod does", "[ops][reduce]") {
  // factor 1: exact integer division, even where double is not exact.
  const int64_t odd = (int64_t{1} << 60) + 1;
  std::vector<int64_t> i64 = {odd, -7};
  ScaleDivideInPlace(i64.data(), i64.size(), DataType::kInt64, 1.0, 1);
  CHECK(i64 == std::vector<int64_t>{odd, -7});
  ScaleDivideInPlace(i64.data(), i64.size(), DataType::kInt64, 1.0, 2);
  CHECK(i64 == std::vector<int64_t>{odd / 2, -3});
  // v * (factor / divisor), truncated once: 7 * 0.75 = 5.25 -> 5 (3 if divided first).
  std::vector<int32_t> i32 = {7, -7, 49};
  ScaleDivideInPlace(i32.data(), i32.size(), DataType::kInt32, 3.0, 4);
  CHECK(i32 == std::vector<int32_t>{5, -5, 36});
  std::vector<int16_t> i16 = {30000, -30000};
  ScaleDivideInPlace(i16.data(), i16.size(), DataType::kInt16, 8.0, 2);
  CHECK(i16 == std::vector<int16_t>{32767, -32768});
  std::vector<uint16_t> u16 = {65535, 3};
  ScaleDivideInPlace(u16.data(), u16.size(), DataType::kUInt16, 0.5, 3);
  CHECK(u16 == std::vector<uint16_t>{10922, 0});
  // Horovod's order: v * (factor / divisor), whose 0.3 / 3 rounds below 0.1: 10 -> 0.
  std::vector<int32_t> horovod = {10, 20};
  ScaleDivideInPlace(horovod.data(), horovod.size(), DataType::kInt32, 0.3, 3);
  CHECK(horovod == std::vector<int32_t>{0, 1});
}

}  // namespace
}  // namespace kolo::ops
