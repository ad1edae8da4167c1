#include "ops/half.h"

namespace kolo::ops {
namespace {

// GCC's default -O2 vectorizer ("very cheap" cost model) only vectorizes loops whose trip
// count is a known multiple of the vector width: convert fixed-size blocks, then the tail.
constexpr size_t kConvertBlock = 16;

template <typename From, typename To, typename Convert>
void ConvertArray(const From* __restrict src, To* __restrict dst, size_t count, Convert convert) {
  size_t i = 0;
  for (; i + kConvertBlock <= count; i += kConvertBlock) {
    for (size_t j = 0; j < kConvertBlock; ++j) dst[i + j] = convert(src[i + j]);
  }
  for (; i < count; ++i) dst[i] = convert(src[i]);
}

}  // namespace

void HalfToFloat(const uint16_t* src, float* dst, size_t count) {
  ConvertArray(src, dst, count, [](uint16_t v) { return HalfToFloat(v); });
}

void FloatToHalf(const float* src, uint16_t* dst, size_t count) {
  ConvertArray(src, dst, count, [](float v) { return FloatToHalf(v); });
}

void BFloat16ToFloat(const uint16_t* src, float* dst, size_t count) {
  ConvertArray(src, dst, count, [](uint16_t v) { return BFloat16ToFloat(v); });
}

void FloatToBFloat16(const float* src, uint16_t* dst, size_t count) {
  ConvertArray(src, dst, count, [](float v) { return FloatToBFloat16(v); });
}

}  // namespace kolo::ops
