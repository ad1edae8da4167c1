// Tests of ops/half.h: float16 and bfloat16 conversions, rounding to nearest even, overflow to
// infinity, subnormals and NaN, against hand-computed bit patterns and (where the compiler has
// it) the compiler's own _Float16 conversion.
#include "ops/half.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace kolo::ops {
namespace {

float Pow2(int e) {
  return std::ldexp(1.0f, e);
}

bool IsHalfNan(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}

TEST_CASE("float16 conversion rounds to nearest, ties to even", "[ops][half]") {
  CHECK(FloatToHalf(1.0f) == 0x3c00);
  CHECK(FloatToHalf(-2.0f) == 0xc000);
  CHECK(FloatToHalf(0.5f) == 0x3800);
  CHECK(FloatToHalf(1.0f + Pow2(-10)) == 0x3c01);
  // 1 + 2^-11 lies halfway between 1 (even) and 1 + 2^-10 (odd).
  CHECK(FloatToHalf(1.0f + Pow2(-11)) == 0x3c00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  CHECK(FloatToHalf(1.0f + 3 * Pow2(-11)) == 0x3c02);
  CHECK(FloatToHalf(1.0f + Pow2(-11) + Pow2(-20)) == 0x3c01);
  CHECK(FloatToHalf(-(1.0f + Pow2(-11))) == 0xbc00);
  // A carry out of the mantissa bumps the exponent: 2 - 2^-12 rounds to 2.
  CHECK(FloatToHalf(2.0f - Pow2(-12)) == 0x4000);
}

TEST_CASE("float16 conversion overflows to infinity and keeps NaN", "[ops][half]") {
  CHECK(FloatToHalf(65504.0f) == 0x7bff);
  CHECK(FloatToHalf(65519.0f) == 0x7bff);
  CHECK(FloatToHalf(65520.0f) == 0x7c00);  // halfway to 2^16: ties to even, the infinity
  CHECK(FloatToHalf(-65520.0f) == 0xfc00);
  CHECK(FloatToHalf(1e6f) == 0x7c00);
  CHECK(FloatToHalf(std::numeric_limits<float>::max()) == 0x7c00);
  CHECK(FloatToHalf(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(FloatToHalf(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(IsHalfNan(FloatToHalf(std::numeric_limits<float>::quiet_NaN())));
  CHECK(IsHalfNan(FloatToHalf(BitsToFloat(0x7f800001u))));  // payload only in dropped bits
  CHECK(IsHalfNan(FloatToHalf(BitsToFloat(0xff800001u))));
  CHECK((FloatToHalf(BitsToFloat(0xffc00000u)) & 0x8000) == 0x8000);
  CHECK(std::isinf(HalfToFloat(uint16_t{0x7c00})));
  CHECK(HalfToFloat(uint16_t{0xfc00}) < 0);
  CHECK(std::isnan(HalfToFloat(uint16_t{0x7e00})));
  CHECK(std::isnan(HalfToFloat(uint16_t{0x7c01})));
  CHECK(HalfToFloat(uint16_t{0x7bff}) == 65504.0f);
}

TEST_CASE("float16 conversion handles subnormals and signed zero", "[ops][half]") {
  CHECK(FloatToHalf(Pow2(-24)) == 0x0001);
  CHECK(FloatToHalf(-Pow2(-24)) == 0x8001);
  CHECK(FloatToHalf(Pow2(-25)) == 0x0000);  // tie between 0 and 2^-24: 0
  CHECK(FloatToHalf(Pow2(-25) * 1.0001f) == 0x0001);
  CHECK(FloatToHalf(3 * Pow2(-25)) == 0x0002);  // tie between 1 and 2 units: 2
  CHECK(FloatToHalf(5 * Pow2(-25)) == 0x0002);  // tie between 2 and 3 units: 2
  CHECK(FloatToHalf(Pow2(-26)) == 0x0000);
  CHECK(FloatToHalf(Pow2(-14)) == 0x0400);              // smallest normal
  CHECK(FloatToHalf(Pow2(-14) - Pow2(-24)) == 0x03ff);  // largest subnormal
  CHECK(FloatToHalf(Pow2(-14) - Pow2(-25)) == 0x0400);  // tie, rounds up into the normals
  CHECK(FloatToHalf(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(FloatToHalf(-0.0f) == 0x8000);
  CHECK(FloatToHalf(0.0f) == 0x0000);
  CHECK(HalfToFloat(uint16_t{0x0001}) == Pow2(-24));
  CHECK(HalfToFloat(uint16_t{0x03ff}) == 1023 * Pow2(-24));
  CHECK(HalfToFloat(uint16_t{0x8001}) == -Pow2(-24));
  CHECK(std::signbit(HalfToFloat(uint16_t{0x8000})));
}

TEST_CASE("every float16 value survives a round trip through float", "[ops][half]") {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const uint16_t back = FloatToHalf(HalfToFloat(half));
    if (IsHalfNan(half)) {
      REQUIRE(IsHalfNan(back));
    } else {
      REQUIRE(back == half);
    }
  }
}

#if defined(__FLT16_MAX__)
uint16_t CompilerHalf(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

TEST_CASE("float16 conversion agrees with the compiler's _Float16", "[ops][half]") {
  // Every exponent and sign with mantissas that sit on, just below and just above the rounding
  // ties of every shift (normal and subnormal results), then random bit patterns.
  std::vector<uint32_t> mantissas = {0, 0x7fffff, 0x7ff000, 0x7fefff};
  for (uint32_t k = 0; k < 23; ++k) {
    mantissas.insert(mantissas.end(), {1u << k, (1u << k) - 1, (1u << k) + 1, 3u << k});
  }
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t exponent = 0; exponent < 255; ++exponent) {
      for (uint32_t mantissa : mantissas) {
        const uint32_t bits = (sign << 31) | (exponent << 23) | (mantissa & 0x7fffffu);
        INFO("float bits " << std::hex << bits);
        REQUIRE(FloatToHalf(BitsToFloat(bits)) == CompilerHalf(BitsToFloat(bits)));
      }
    }
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> random_bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = random_bits(rng);
    if (i % 2 == 0) bits = (bits & 0x807fffffu) | ((100u + (bits >> 23) % 50u) << 23);
    const float f = BitsToFloat(bits);
    if (std::isnan(f)) continue;
    INFO("float bits " << std::hex << bits);
    REQUIRE(FloatToHalf(f) == CompilerHalf(f));
  }
}
#endif

TEST_CASE("bfloat16 conversion rounds to nearest even and overflows to infinity", "[ops][half]") {
  CHECK(FloatToBFloat16(1.0f) == 0x3f80);
  CHECK(FloatToBFloat16(BitsToFloat(0x3f808000u)) == 0x3f80);  // tie: even stays
  CHECK(FloatToBFloat16(BitsToFloat(0x3f818000u)) == 0x3f82);  // tie: odd rounds up
  CHECK(FloatToBFloat16(BitsToFloat(0x3f808001u)) == 0x3f81);
  CHECK(FloatToBFloat16(BitsToFloat(0xbf808001u)) == 0xbf81);
  CHECK(FloatToBFloat16(BitsToFloat(0x7f7f7fffu)) == 0x7f7f);
  CHECK(FloatToBFloat16(BitsToFloat(0x7f7f8000u)) == 0x7f80);  // tie past the max: infinity
  CHECK(FloatToBFloat16(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(FloatToBFloat16(-std::numeric_limits<float>::max()) == 0xff80);
  CHECK(FloatToBFloat16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(FloatToBFloat16(BitsToFloat(0x00010000u)) == 0x0001);  // subnormals
  CHECK(FloatToBFloat16(BitsToFloat(0x00008000u)) == 0x0000);
  CHECK(FloatToBFloat16(BitsToFloat(0x00018000u)) == 0x0002);
  CHECK(FloatToBFloat16(-0.0f) == 0x8000);
  const uint16_t nan = FloatToBFloat16(BitsToFloat(0x7f800001u));
  CHECK((nan & 0x7f80) == 0x7f80);
  CHECK((nan & 0x007f) != 0);
  CHECK(std::isnan(BFloat16ToFloat(nan)));
  CHECK(BFloat16ToFloat(0x3f80) == 1.0f);
  CHECK(BFloat16ToFloat(0x0001) == BitsToFloat(0x00010000u));
  CHECK(std::isinf(BFloat16ToFloat(0xff80)));
}

TEST_CASE("array conversions match the scalar ones", "[ops][half]") {
  // 37 values: two vectorized blocks and a scalar tail.
  std::vector<float> values = {0.0f,
                               -1.5f,
                               65520.0f,
                               Pow2(-24),
                               3.14159f,
                               -Pow2(-20),
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               1e-40f};
  while (values.size() < 37) values.push_back(static_cast<float>(values.size()) * 0.37f);
  const size_t n = values.size();
  std::vector<uint16_t> halves(n);
  std::vector<uint16_t> bf16(n);
  std::vector<float> back(n);
  std::vector<float> bf16_back(n);
  FloatToHalf(values.data(), halves.data(), n);
  HalfToFloat(halves.data(), back.data(), n);
  FloatToBFloat16(values.data(), bf16.data(), n);
  BFloat16ToFloat(bf16.data(), bf16_back.data(), n);
  for (size_t i = 0; i < n; ++i) {
    CHECK(halves[i] == FloatToHalf(values[i]));
    CHECK(FloatBits(back[i]) == FloatBits(HalfToFloat(halves[i])));
    CHECK(bf16[i] == FloatToBFloat16(values[i]));
    CHECK(FloatBits(bf16_back[i]) == FloatBits(BFloat16ToFloat(bf16[i])));
  }
}

}  // namespace
}  // namespace kolo::ops
