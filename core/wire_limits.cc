#include "core/wire_limits.h"

namespace kolo {

std::string DescribeOversize(const std::vector<int64_t>& shape, DataType dtype) {
  const auto element_bytes = static_cast<int64_t>(DataTypeSize(dtype));
  int64_t nonzero_product = 1;
  for (int64_t d : shape) {
    if (d <= 0) continue;
    if (nonzero_product > kMaxTensorBytes / d / element_bytes) {
      return "shape " + ShapeToString(shape) + " of " + DataTypeName(dtype) + ", over " +
             std::to_string(kMaxTensorBytes) + " bytes";
    }
    nonzero_product *= d;
  }
  return "";
}

int64_t FirstInvalidUtf8(const std::string& text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The sequence's length, the lead byte's payload bits, and the smallest code point that
    // needs this length (below it, the form is overlong).
    size_t length = 4;
    uint32_t code = lead & 0x07;
    uint32_t smallest = 0x10000;
    if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code = lead & 0x1F;
      smallest = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code = lead & 0x0F;
      smallest = 0x800;
    } else if ((lead & 0xF8) != 0xF0) {
      return static_cast<int64_t>(i);  // a continuation byte or 0xF8..0xFF
    }
    if (n - i < length) return static_cast<int64_t>(i);
    for (size_t k = 1; k < length; ++k) {
      if ((bytes[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      code = (code << 6) | (bytes[i + k] & 0x3F);
    }
    if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return static_cast<int64_t>(i);
    }
    i += length;
  }
  return -1;
}

}  // namespace kolo
