// What kolo's control protocol can carry for one tensor, checked alike by the enqueue on each
// rank (core/op_validation.cc) and by the controller on what ranks announce
// (controller/meta_validation.cc): a byte size within kMaxTensorBytes, computed without
// overflow, and a name that is valid UTF-8 (protobuf refuses anything else on the wire).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/types.h"

namespace kolo {

// The largest tensor one rank may announce, in bytes (1 TiB): the controller's byte
// arithmetic (fusion, allgather totals over up to 2^20 ranks) stays within int64.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 40;

// "" when a tensor of `shape` (no negative dimension) and `dtype` holds at most
// kMaxTensorBytes, else the reason, e.g. "shape [1099511627776] of float32, over
// 1099511627776 bytes". Bounds the product of the non-zero dimensions, so every partial
// product stays in int64 and a zero-size tensor with huge other dimensions is refused too.
std::string DescribeOversize(const std::vector<int64_t>& shape, DataType dtype);

// The byte offset of the first byte of `text` that does not start a well-formed UTF-8
// sequence (overlong forms, surrogates and code points over U+10FFFF are malformed), or -1
// when all of it is valid.
int64_t FirstInvalidUtf8(const std::string& text);

}  // namespace kolo
