// Input pattern and exact expected results for kolo-bench; see bench_pattern.h.
#include "tools/bench/bench_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kolo::bench {
namespace {

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t bits = FloatBits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

uint16_t FloatToHalf(float f) {
  uint32_t bits = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  float magnitude = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00;
  if (magnitude >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (magnitude < 6.103515625e-05f) {
    // Subnormal: units of 2^-24, rounded to nearest even by the FPU.
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  uint32_t m = FloatBits(magnitude);
  uint32_t rounded = m + 0xfff + ((m >> 13) & 1);  // round the 13 dropped bits to nearest even
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {
    float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7f800000 | (mantissa << 13));
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

template <typename T>
void StoreAs(double value, void* out) {
  T v = static_cast<T>(value);
  std::memcpy(out, &v, sizeof(v));
}

template <typename T>
double LoadAs(const void* in) {
  T v;
  std::memcpy(&v, in, sizeof(v));
  return static_cast<double>(v);
}

// Integers wrap (two's complement) like the reduce kernels' arithmetic in the element type.
template <typename T>
void StoreWrapped(double value, void* out) {
  T v = static_cast<T>(static_cast<int64_t>(value));
  std::memcpy(out, &v, sizeof(v));
}

int MantissaBits(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return 10;
    case DataType::kBFloat16:
      return 7;
    case DataType::kFloat32:
      return 23;
    case DataType::kFloat64:
      return 52;
    default:
      return 0;
  }
}

bool IsSigned(DataType dtype) {
  return dtype != DataType::kUInt8 && dtype != DataType::kUInt16 && dtype != DataType::kBool;
}

}  // namespace

void Tile(const std::vector<unsigned char>& period, void* data, size_t total) {
  auto* out = static_cast<unsigned char*>(data);
  for (size_t done = 0; done < total; done += period.size()) {
    std::memcpy(out + done, period.data(), std::min(period.size(), total - done));
  }
}

void EncodeValue(DataType dtype, double value, void* out) {
  switch (dtype) {
    case DataType::kUInt8:
      StoreWrapped<uint8_t>(value, out);
      return;
    case DataType::kInt8:
      StoreWrapped<int8_t>(value, out);
      return;
    case DataType::kInt32:
      StoreWrapped<int32_t>(value, out);
      return;
    case DataType::kInt64:
      StoreAs<int64_t>(value, out);
      return;
    case DataType::kUInt16:
      StoreWrapped<uint16_t>(value, out);
      return;
    case DataType::kInt16:
      StoreWrapped<int16_t>(value, out);
      return;
    case DataType::kBool:  // a one-bit unsigned integer: wraps to the lowest bit
      StoreAs<uint8_t>(static_cast<uint8_t>(static_cast<int64_t>(value) & 1), out);
      return;
    case DataType::kFloat16:
      StoreAs<uint16_t>(FloatToHalf(static_cast<float>(value)), out);
      return;
    case DataType::kBFloat16:
      StoreAs<uint16_t>(FloatToBFloat16(static_cast<float>(value)), out);
      return;
    case DataType::kFloat32:
      StoreAs<float>(value, out);
      return;
    case DataType::kFloat64:
      StoreAs<double>(value, out);
      return;
  }
}

double DecodeValue(DataType dtype, const void* in) {
  uint16_t bits16;
  switch (dtype) {
    case DataType::kUInt8:
      return LoadAs<uint8_t>(in);
    case DataType::kInt8:
      return LoadAs<int8_t>(in);
    case DataType::kInt32:
      return LoadAs<int32_t>(in);
    case DataType::kInt64:
      return LoadAs<int64_t>(in);
    case DataType::kUInt16:
      return LoadAs<uint16_t>(in);
    case DataType::kInt16:
      return LoadAs<int16_t>(in);
    case DataType::kBool:
      return LoadAs<uint8_t>(in);
    case DataType::kFloat16:
      std::memcpy(&bits16, in, 2);
      return HalfToFloat(bits16);
    case DataType::kBFloat16:
      std::memcpy(&bits16, in, 2);
      return BitsToFloat(static_cast<uint32_t>(bits16) << 16);
    case DataType::kFloat32:
      return LoadAs<float>(in);
    case DataType::kFloat64:
      return LoadAs<double>(in);
  }
  return std::nan("");
}

BenchPattern::BenchPattern(DataType dtype, ReduceOp op, int rank, int size)
    : dtype_(dtype), op_(op), rank_(rank), size_(size), element_size_(DataTypeSize(dtype)) {
  input_.resize(kPeriod * element_size_);
  expected_.resize(kPeriod * element_size_);
  for (int j = 0; j < kPeriod; ++j) {
    EncodeValue(dtype_, InputValue(rank_, j), &input_[j * element_size_]);
    EncodeValue(dtype_, ExpectedValue(j), &expected_[j * element_size_]);
  }
  poison_ = expected_;
  for (unsigned char& byte : poison_) byte = static_cast<unsigned char>(~byte);
}

double BenchPattern::InputValue(int rank, int j) const {
  if (dtype_ == DataType::kBool) {
    // Or (sum, max): true on one rank in four per element; and (min, product): false there.
    const bool marked = (j + rank) % 4 == 0;
    return (op_ == ReduceOp::kMin || op_ == ReduceOp::kProduct) ? !marked : marked;
  }
  const bool is_signed = IsSigned(dtype_);
  switch (op_) {
    case ReduceOp::kSum:  // -1..1 (0..2 unsigned): partial sums stay within +-size
      return (rank + j) % 3 - (is_signed ? 1 : 0);
    case ReduceOp::kAverage: {
      // 1 + j%2, moved up and down in pairs of ranks so that the sum is size * (1 + j%2)
      // and the average is exact, also after integer division.
      int wobble = (size_ % 2 == 1 && rank == size_ - 1) ? 0 : (rank % 2 == 0 ? 1 : -1);
      return 1 + j % 2 + wobble;
    }
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return (rank * 3 + j) % 5 - (is_signed ? 2 : 0);
    case ReduceOp::kProduct: {
      // 1 or 2 (2 on at most two of the first six ranks), negated on rank 1 now and then:
      // the product's magnitude is at most 4.
      double v = (rank < 6 && (rank + j) % 4 == 0) ? 2 : 1;
      return (is_signed && rank == 1 && j % 3 == 0) ? -v : v;
    }
  }
  return 0;
}

double BenchPattern::ExpectedValue(int j) const {
  double result = InputValue(0, j);
  for (int r = 1; r < size_; ++r) {
    double v = InputValue(r, j);
    switch (op_) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        result += v;
        if (dtype_ == DataType::kBool) result = result != 0;  // logical or
        break;
      case ReduceOp::kMin:
        result = std::min(result, v);
        break;
      case ReduceOp::kMax:
        result = std::max(result, v);
        break;
      case ReduceOp::kProduct:
        result *= v;
        break;
    }
  }
  return op_ == ReduceOp::kAverage ? result / size_ : result;
}

void BenchPattern::FillInput(void* data, int64_t count) const {
  Tile(input_, data, static_cast<size_t>(count) * element_size_);
}

void BenchPattern::FillPoison(void* data, int64_t count) const {
  Tile(poison_, data, static_cast<size_t>(count) * element_size_);
}

bool BenchPattern::ElementMatches(const unsigned char* got, int j) const {
  const unsigned char* want = &expected_[j * element_size_];
  if (std::memcmp(got, want, element_size_) == 0) return true;
  if (op_ != ReduceOp::kAverage || !IsFloatingPoint(dtype_)) return false;
  double expected = DecodeValue(dtype_, want);
  double tolerance = std::ldexp(std::fabs(expected), -MantissaBits(dtype_));
  return std::fabs(DecodeValue(dtype_, got) - expected) <= tolerance;
}

int64_t BenchPattern::CountWrong(const void* data, int64_t count) const {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const size_t block = expected_.size();
  int64_t wrong = 0;
  for (int64_t start = 0; start < count; start += kPeriod) {
    int64_t n = std::min<int64_t>(kPeriod, count - start);
    const unsigned char* got = bytes + static_cast<size_t>(start) * element_size_;
    // Fast path: the whole period matches byte for byte.
    if (n == kPeriod && std::memcmp(got, expected_.data(), block) == 0) continue;
    for (int j = 0; j < n; ++j) {
      if (!ElementMatches(got + static_cast<size_t>(j) * element_size_, j)) ++wrong;
    }
  }
  return wrong;
}

}  // namespace kolo::bench
