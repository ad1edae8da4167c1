#include "ops/reduce_kernels.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include "core/check.h"
#include "ops/half.h"

namespace kolo::ops {
namespace {

[[noreturn]] void Die(const char* what, DataType dtype) {
  KOLO_CHECK(false) << what << ": unsupported dtype " << DataTypeName(dtype);
}

// Elements per inner loop. GCC's default -O2 vectorizer cost model ("very cheap") only
// vectorizes loops whose trip count is a known multiple of the vector width, so the hot loops
// run a fixed-width inner loop over blocks and finish the tail in scalar code.
constexpr size_t kBlock = 16;

// dst[i] = f(dst[i], src[i]); dst and src do not overlap.
template <typename T, typename F>
inline void ApplyBinary(T* __restrict dst, const T* __restrict src, size_t count, F f) {
  size_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) dst[i + j] = f(dst[i + j], src[i + j]);
  }
  for (; i < count; ++i) dst[i] = f(dst[i], src[i]);
}

// dst[i] = f(src[i], dst[i]): ApplyBinary with the operands in the other order.
template <typename T, typename F>
inline void ApplyBinaryReversed(T* __restrict dst, const T* __restrict src, size_t count, F f) {
  ApplyBinary(dst, src, count, [f](T d, T s) { return f(s, d); });
}

// dst = dst (op) src, or dst = src (op) dst with kReversed.
template <bool kReversed, typename T, typename F>
inline void ApplyOp(T* dst, const T* src, size_t count, F f) {
  if constexpr (kReversed) {
    ApplyBinaryReversed(dst, src, count, f);
  } else {
    ApplyBinary(dst, src, count, f);
  }
}

// dst[i] = f(a[i], b[i]); dst overlaps neither.
template <typename T, typename F>
inline void ApplyTernary(T* __restrict dst, const T* __restrict a, const T* __restrict b,
                         size_t count, F f) {
  size_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) dst[i + j] = f(a[i + j], b[i + j]);
  }
  for (; i < count; ++i) dst[i] = f(a[i], b[i]);
}

// dst[i] = f(src[i]); dst and src do not overlap.
template <typename T, typename F>
inline void ApplyUnary(T* __restrict dst, const T* __restrict src, size_t count, F f) {
  size_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) dst[i + j] = f(src[i + j]);
  }
  for (; i < count; ++i) dst[i] = f(src[i]);
}

// buf[i] = f(buf[i]).
template <typename T, typename F>
inline void ApplyInPlace(T* __restrict buf, size_t count, F f) {
  size_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) buf[i + j] = f(buf[i + j]);
  }
  for (; i < count; ++i) buf[i] = f(buf[i]);
}

// The unsigned type integer sum and product are computed in: at least `unsigned`, since
// narrower types promote to (signed) int, where 65535 * 65535 would overflow.
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

// Integer sum and product wrap (in unsigned arithmetic: signed overflow would be UB).
template <typename T>
T Add(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a + b;
  } else {
    using W = WrapType<T>;
    return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
  }
}

template <typename T>
T Multiply(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a * b;
  } else {
    using W = WrapType<T>;
    return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
  }
}

// `b != b` is true only for NaN: a NaN on either side wins, as in PyTorch's min/max.
template <typename T>
T Min(T a, T b) {
  return (b < a || b != b) ? b : a;
}

template <typename T>
T Max(T a, T b) {
  return (b > a || b != b) ? b : a;
}

template <bool kReversed = false, typename T>
void ReduceTyped(T* dst, const T* src, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return ApplyOp<kReversed>(dst, src, count, Add<T>);
    case ReduceOp::kMin:
      return ApplyOp<kReversed>(dst, src, count, Min<T>);
    case ReduceOp::kMax:
      return ApplyOp<kReversed>(dst, src, count, Max<T>);
    case ReduceOp::kProduct:
      return ApplyOp<kReversed>(dst, src, count, Multiply<T>);
  }
  KOLO_CHECK(false) << "Reduce: unsupported op " << ReduceOpName(op);
}

template <typename T>
void ReduceIntoTyped(T* dst, const T* a, const T* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return ApplyTernary(dst, a, b, count, Add<T>);
    case ReduceOp::kMin:
      return ApplyTernary(dst, a, b, count, Min<T>);
    case ReduceOp::kMax:
      return ApplyTernary(dst, a, b, count, Max<T>);
    case ReduceOp::kProduct:
      return ApplyTernary(dst, a, b, count, Multiply<T>);
  }
  KOLO_CHECK(false) << "ReduceInto: unsupported op " << ReduceOpName(op);
}

// bool as bytes (never as C++ bool, for which a byte other than 0 or 1 would be UB).
uint8_t LogicalOr(uint8_t a, uint8_t b) {
  return static_cast<uint8_t>((a | b) != 0);
}

uint8_t LogicalAnd(uint8_t a, uint8_t b) {
  return static_cast<uint8_t>((a != 0) & (b != 0));
}

template <bool kReversed = false>
void ReduceBool(uint8_t* dst, const uint8_t* src, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kMax:
      return ApplyOp<kReversed>(dst, src, count, LogicalOr);
    case ReduceOp::kMin:
    case ReduceOp::kProduct:
      return ApplyOp<kReversed>(dst, src, count, LogicalAnd);
  }
  KOLO_CHECK(false) << "Reduce: unsupported op " << ReduceOpName(op);
}

void ReduceIntoBool(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kMax:
      return ApplyTernary(dst, a, b, count, LogicalOr);
    case ReduceOp::kMin:
    case ReduceOp::kProduct:
      return ApplyTernary(dst, a, b, count, LogicalAnd);
  }
  KOLO_CHECK(false) << "ReduceInto: unsupported op " << ReduceOpName(op);
}

// 16-bit floats: widen a block to float, run the float kernel, round back.
struct HalfCodec {
  static void Widen(const uint16_t* src, float* dst, size_t n) { HalfToFloat(src, dst, n); }
  static void Narrow(const float* src, uint16_t* dst, size_t n) { FloatToHalf(src, dst, n); }
};
struct BFloat16Codec {
  static void Widen(const uint16_t* src, float* dst, size_t n) { BFloat16ToFloat(src, dst, n); }
  static void Narrow(const float* src, uint16_t* dst, size_t n) { FloatToBFloat16(src, dst, n); }
};

constexpr size_t kWideBlock = 256;  // floats per block: two blocks stay in L1

template <typename Codec, bool kReversed = false>
void ReduceHalfTyped(uint16_t* dst, const uint16_t* src, size_t count, ReduceOp op) {
  float a[kWideBlock];
  float b[kWideBlock];
  for (size_t begin = 0; begin < count; begin += kWideBlock) {
    const size_t n = count - begin < kWideBlock ? count - begin : kWideBlock;
    Codec::Widen(dst + begin, a, n);
    Codec::Widen(src + begin, b, n);
    ReduceTyped<kReversed>(a, b, n, op);
    Codec::Narrow(a, dst + begin, n);
  }
}

template <typename Codec>
void ReduceIntoHalfTyped(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count,
                         ReduceOp op) {
  float x[kWideBlock];
  float y[kWideBlock];
  for (size_t begin = 0; begin < count; begin += kWideBlock) {
    const size_t n = count - begin < kWideBlock ? count - begin : kWideBlock;
    Codec::Widen(a + begin, x, n);
    Codec::Widen(b + begin, y, n);
    ReduceTyped(x, y, n, op);
    Codec::Narrow(x, dst + begin, n);
  }
}

template <typename Codec>
void ScaleHalfTyped(uint16_t* dst, const uint16_t* src, size_t count, double factor) {
  float a[kWideBlock];
  for (size_t begin = 0; begin < count; begin += kWideBlock) {
    const size_t n = count - begin < kWideBlock ? count - begin : kWideBlock;
    Codec::Widen(src + begin, a, n);
    const auto f = static_cast<float>(factor);  // Horovod's: the factor as float, float math
    ApplyInPlace(a, n, [f](float v) { return f * v; });
    Codec::Narrow(a, dst + begin, n);
  }
}

// `x` truncated toward zero into the integer type T, saturating outside T's range (a plain
// conversion would be UB there). kAbove is max + 1, a power of two exact in double (for int64
// max itself rounds up to it); truncation goes below T's minimum only from x <= min - 1.
template <typename T>
T TruncateToInteger(double x) {
  constexpr double kAbove = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
  constexpr double kBelow = static_cast<double>(std::numeric_limits<T>::min()) - 1.0;
  if (x >= kAbove) return std::numeric_limits<T>::max();
  if (x <= kBelow) return std::numeric_limits<T>::min();
  return static_cast<T>(x);
}

template <typename T>
void ScaleTyped(T* dst, const T* src, size_t count, double factor) {
  auto scale = [factor](T v) {
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(factor) * v;  // in T, as Horovod's ScaleBuffer
    } else {
      return TruncateToInteger<T>(static_cast<double>(v) * factor);
    }
  };
  if (dst == src) {
    ApplyInPlace(dst, count, scale);
  } else {
    ApplyUnary(dst, src, count, scale);
  }
}

template <typename T>
void ScaleDivideTyped(T* buf, size_t count, double factor, int64_t divisor) {
  const double scale = factor / static_cast<double>(divisor);  // Horovod's postscale / size
  ApplyInPlace(buf, count,
               [scale](T v) { return TruncateToInteger<T>(static_cast<double>(v) * scale); });
}

// In int64 so that a divisor beyond T's range (300 ranks, uint8) stays exact.
template <typename T>
void DivideTyped(T* buf, size_t count, int64_t divisor) {
  ApplyInPlace(buf, count,
               [divisor](T v) { return static_cast<T>(static_cast<int64_t>(v) / divisor); });
}

template <bool kReversed>
void ReduceAny(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kUInt8:
      return ReduceTyped<kReversed>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src),
                                    count, op);
    case DataType::kInt8:
      return ReduceTyped<kReversed>(static_cast<int8_t*>(dst), static_cast<const int8_t*>(src),
                                    count, op);
    case DataType::kInt32:
      return ReduceTyped<kReversed>(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src),
                                    count, op);
    case DataType::kInt64:
      return ReduceTyped<kReversed>(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src),
                                    count, op);
    case DataType::kFloat16:
      return ReduceHalfTyped<HalfCodec, kReversed>(static_cast<uint16_t*>(dst),
                                                   static_cast<const uint16_t*>(src), count, op);
    case DataType::kBFloat16:
      return ReduceHalfTyped<BFloat16Codec, kReversed>(
          static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count, op);
    case DataType::kFloat32:
      return ReduceTyped<kReversed>(static_cast<float*>(dst), static_cast<const float*>(src), count,
                                    op);
    case DataType::kFloat64:
      return ReduceTyped<kReversed>(static_cast<double*>(dst), static_cast<const double*>(src),
                                    count, op);
    case DataType::kUInt16:
      return ReduceTyped<kReversed>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src),
                                    count, op);
    case DataType::kInt16:
      return ReduceTyped<kReversed>(static_cast<int16_t*>(dst), static_cast<const int16_t*>(src),
                                    count, op);
    case DataType::kBool:
      return ReduceBool<kReversed>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src),
                                   count, op);
  }
  Die("Reduce", dtype);
}

}  // namespace

void Reduce(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op) {
  ReduceAny<false>(dst, src, count, dtype, op);
}

void ReduceReversed(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op) {
  ReduceAny<true>(dst, src, count, dtype, op);
}

void ReduceInto(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                ReduceOp op) {
  switch (dtype) {
    case DataType::kUInt8:
      return ReduceIntoTyped(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a),
                             static_cast<const uint8_t*>(b), count, op);
    case DataType::kInt8:
      return ReduceIntoTyped(static_cast<int8_t*>(dst), static_cast<const int8_t*>(a),
                             static_cast<const int8_t*>(b), count, op);
    case DataType::kInt32:
      return ReduceIntoTyped(static_cast<int32_t*>(dst), static_cast<const int32_t*>(a),
                             static_cast<const int32_t*>(b), count, op);
    case DataType::kInt64:
      return ReduceIntoTyped(static_cast<int64_t*>(dst), static_cast<const int64_t*>(a),
                             static_cast<const int64_t*>(b), count, op);
    case DataType::kFloat16:
      return ReduceIntoHalfTyped<HalfCodec>(static_cast<uint16_t*>(dst),
                                            static_cast<const uint16_t*>(a),
                                            static_cast<const uint16_t*>(b), count, op);
    case DataType::kBFloat16:
      return ReduceIntoHalfTyped<BFloat16Codec>(static_cast<uint16_t*>(dst),
                                                static_cast<const uint16_t*>(a),
                                                static_cast<const uint16_t*>(b), count, op);
    case DataType::kFloat32:
      return ReduceIntoTyped(static_cast<float*>(dst), static_cast<const float*>(a),
                             static_cast<const float*>(b), count, op);
    case DataType::kFloat64:
      return ReduceIntoTyped(static_cast<double*>(dst), static_cast<const double*>(a),
                             static_cast<const double*>(b), count, op);
    case DataType::kUInt16:
      return ReduceIntoTyped(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                             static_cast<const uint16_t*>(b), count, op);
    case DataType::kInt16:
      return ReduceIntoTyped(static_cast<int16_t*>(dst), static_cast<const int16_t*>(a),
                             static_cast<const int16_t*>(b), count, op);
    case DataType::kBool:
      return ReduceIntoBool(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a),
                            static_cast<const uint8_t*>(b), count, op);
  }
  Die("ReduceInto", dtype);
}

void ScaleCopy(void* dst, const void* src, size_t count, DataType dtype, double factor) {
  if (factor == 1.0) {
    if (dst != src && count > 0) std::memcpy(dst, src, count * DataTypeSize(dtype));
    return;
  }
  switch (dtype) {
    case DataType::kFloat16:
      return ScaleHalfTyped<HalfCodec>(static_cast<uint16_t*>(dst),
                                       static_cast<const uint16_t*>(src), count, factor);
    case DataType::kBFloat16:
      return ScaleHalfTyped<BFloat16Codec>(static_cast<uint16_t*>(dst),
                                           static_cast<const uint16_t*>(src), count, factor);
    case DataType::kFloat32:
      return ScaleTyped(static_cast<float*>(dst), static_cast<const float*>(src), count, factor);
    case DataType::kFloat64:
      return ScaleTyped(static_cast<double*>(dst), static_cast<const double*>(src), count, factor);
    case DataType::kUInt8:
      return ScaleTyped(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count,
                        factor);
    case DataType::kInt8:
      return ScaleTyped(static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), count, factor);
    case DataType::kUInt16:
      return ScaleTyped(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count,
                        factor);
    case DataType::kInt16:
      return ScaleTyped(static_cast<int16_t*>(dst), static_cast<const int16_t*>(src), count,
                        factor);
    case DataType::kInt32:
      return ScaleTyped(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), count,
                        factor);
    case DataType::kInt64:
      return ScaleTyped(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), count,
                        factor);
    default:
      Die("ScaleCopy with a factor other than 1", dtype);
  }
}

void DivideInPlace(void* buf, size_t count, DataType dtype, int64_t divisor) {
  KOLO_CHECK(divisor > 0) << "DivideInPlace: divisor " << divisor;
  switch (dtype) {
    case DataType::kUInt8:
      return DivideTyped(static_cast<uint8_t*>(buf), count, divisor);
    case DataType::kInt8:
      return DivideTyped(static_cast<int8_t*>(buf), count, divisor);
    case DataType::kUInt16:
      return DivideTyped(static_cast<uint16_t*>(buf), count, divisor);
    case DataType::kInt16:
      return DivideTyped(static_cast<int16_t*>(buf), count, divisor);
    case DataType::kInt32:
      return DivideTyped(static_cast<int32_t*>(buf), count, divisor);
    case DataType::kInt64:
      return DivideTyped(static_cast<int64_t*>(buf), count, divisor);
    default:
      Die("DivideInPlace", dtype);
  }
}

void ScaleDivideInPlace(void* buf, size_t count, DataType dtype, double factor, int64_t divisor) {
  KOLO_CHECK(divisor > 0) << "ScaleDivideInPlace: divisor " << divisor;
  if (factor == 1.0) return DivideInPlace(buf, count, dtype, divisor);
  switch (dtype) {
    case DataType::kUInt8:
      return ScaleDivideTyped(static_cast<uint8_t*>(buf), count, factor, divisor);
    case DataType::kInt8:
      return ScaleDivideTyped(static_cast<int8_t*>(buf), count, factor, divisor);
    case DataType::kUInt16:
      return ScaleDivideTyped(static_cast<uint16_t*>(buf), count, factor, divisor);
    case DataType::kInt16:
      return ScaleDivideTyped(static_cast<int16_t*>(buf), count, factor, divisor);
    case DataType::kInt32:
      return ScaleDivideTyped(static_cast<int32_t*>(buf), count, factor, divisor);
    case DataType::kInt64:
      return ScaleDivideTyped(static_cast<int64_t*>(buf), count, factor, divisor);
    default:
      Die("ScaleDivideInPlace", dtype);
  }
}

}  // namespace kolo::ops
