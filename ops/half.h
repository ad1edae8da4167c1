// Conversions between float and the 16-bit floating-point formats kolo reduces: IEEE 754
// binary16 ("float16") and bfloat16. Rounding is to nearest, ties to even; infinities, NaNs
// (made quiet, sign and top payload bits kept) and subnormals are handled exactly. Called by the
// reduce kernels (ops/reduce_kernels.cc) and by tests. Pure functions; safe from any thread.
//
// The float16 conversions are branch-free (selects on masks) so that loops over arrays
// vectorize. They assume the default rounding mode; flush-to-zero and denormals-are-zero modes
// do not change their results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kolo::ops {

inline uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

inline float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// condition ? a : b, written so that the compiler emits a select rather than a branch.
inline uint32_t SelectBits(bool condition, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (a & mask) | (b & ~mask);
}

// Exact: every binary16 value is a float.
inline float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t magnitude = half & 0x7fffu;
  // Normal: move exponent and mantissa into place and rebias by 127 - 15; infinity and NaN
  // rebias to float's all-ones exponent instead.
  const uint32_t rebias = SelectBits(magnitude >= 0x7c00u, (255u - 31u) << 23, (127u - 15u) << 23);
  const uint32_t normal = (magnitude << 13) + rebias;
  // Zero and subnormals are magnitude * 2^-24, a normal float: exact in float arithmetic.
  const uint32_t subnormal = FloatBits(static_cast<float>(magnitude) * 0x1p-24f);
  return BitsToFloat(sign | SelectBits(magnitude < 0x400u, subnormal, normal));
}

// Rounds to nearest even. Magnitudes >= 65520 become infinity; below 2^-24 they round to
// (signed) zero or the smallest subnormal.
inline uint16_t FloatToHalf(float value) {
  const uint32_t bits = FloatBits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  // Normal: rebias the exponent and round away 13 mantissa bits to nearest even (add just
  // under half, plus one if the kept part is odd). A carry out of the mantissa bumps the
  // exponent, and from 65520 up it lands exactly on infinity (0x7c00).
  const uint32_t rebiased = magnitude - ((127u - 15u) << 23);
  const uint32_t normal = (rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13;
  // Below 2^-14: adding 0.5 (whose ulp is 2^-24) makes the FPU round to a multiple of 2^-24;
  // the low bits are then the subnormal's mantissa (0x400 = the smallest normal).
  const uint32_t subnormal = FloatBits(BitsToFloat(magnitude) + 0.5f) - FloatBits(0.5f);
  const uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x3ffu);  // quiet, top payload bits
  uint32_t result = SelectBits(magnitude < 0x38800000u, subnormal, normal);
  result = SelectBits(magnitude >= 0x47800000u, 0x7c00u, result);  // >= 2^16 or infinity
  result = SelectBits(magnitude > 0x7f800000u, nan, result);
  return static_cast<uint16_t>(sign | result);
}

// Exact: bfloat16 is the top half of a float.
inline float BFloat16ToFloat(uint16_t bf16) {
  return BitsToFloat(static_cast<uint32_t>(bf16) << 16);
}

// Rounds to nearest even; values that round past the largest finite bfloat16 become infinity.
inline uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = FloatBits(value);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t nan = (bits >> 16) | 0x0040u;  // keep a NaN a (quiet) NaN
  return static_cast<uint16_t>(SelectBits((bits & 0x7fffffffu) > 0x7f800000u, nan, rounded));
}

// Array forms (vectorized); `src` and `dst` must not overlap.
void HalfToFloat(const uint16_t* src, float* dst, size_t count);
void FloatToHalf(const float* src, uint16_t* dst, size_t count);
void BFloat16ToFloat(const uint16_t* src, float* dst, size_t count);
void FloatToBFloat16(const float* src, uint16_t* dst, size_t count);

}  // namespace kolo::ops
