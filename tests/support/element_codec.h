// Test helper: reads and writes element i of a buffer of any kolo dtype as a
// double, so that inputs and expected results can be written once for every dtype. Values
// are converted with the dtype's own rounding (float16/bfloat16 through ops/half.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kolo/types.h"
#include "ops/half.h"

namespace kolo::testing {

inline double LoadElement(DataType dtype, const void* data, size_t i) {
  switch (dtype) {
    case DataType::kUInt8:
      return static_cast<const uint8_t*>(data)[i];
    case DataType::kInt8:
      return static_cast<const int8_t*>(data)[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(data)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DataType::kFloat16:
      return ops::HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case DataType::kBFloat16:
      return ops::BFloat16ToFloat(static_cast<const uint16_t*>(data)[i]);
    case DataType::kFloat32:
      return static_cast<const float*>(data)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(data)[i];
    case DataType::kUInt16:
      return static_cast<const uint16_t*>(data)[i];
    case DataType::kInt16:
      return static_cast<const int16_t*>(data)[i];
    case DataType::kBool:
      return static_cast<const uint8_t*>(data)[i];  // the byte itself: 0 and 1 are kolo's
  }
  return 0;
}

inline void StoreElement(DataType dtype, void* data, size_t i, double value) {
  switch (dtype) {
    case DataType::kUInt8:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(value);
      return;
    case DataType::kInt8:
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(value);
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value);
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(data)[i] = static_cast<int64_t>(value);
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(data)[i] = ops::FloatToHalf(static_cast<float>(value));
      return;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(data)[i] = ops::FloatToBFloat16(static_cast<float>(value));
      return;
    case DataType::kFloat32:
      static_cast<float*>(data)[i] = static_cast<float>(value);
      return;
    case DataType::kFloat64:
      static_cast<double*>(data)[i] = value;
      return;
    case DataType::kUInt16:
      static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(value);
      return;
    case DataType::kInt16:
      static_cast<int16_t*>(data)[i] = static_cast<int16_t>(value);
      return;
    case DataType::kBool:
      static_cast<uint8_t*>(data)[i] = value != 0 ? 1 : 0;
      return;
  }
}

// A byte buffer of `count` elements of `dtype`, aligned for any dtype.
class ElementBuffer {
 public:
  ElementBuffer(DataType dtype, size_t count)
      : dtype_(dtype), count_(count), words_((count * DataTypeSize(dtype) + 7) / 8 + 1) {}
  void* data() { return words_.data(); }
  const void* data() const { return words_.data(); }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * DataTypeSize(dtype_); }
  double Get(size_t i) const { return LoadElement(dtype_, data(), i); }
  void Set(size_t i, double value) { StoreElement(dtype_, data(), i, value); }

 private:
  DataType dtype_;
  size_t count_;
  std::vector<uint64_t> words_;
};

inline bool BytesEqual(const ElementBuffer& a, const ElementBuffer& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

}  // namespace kolo::testing
