#include "tests/support/tensor_values.h"

#include <cmath>
#include <cstring>

#include "tests/support/element_codec.h"
#include "tests/support/reference_reduce.h"

namespace kolo::testing {

double InputValue(int rank, int64_t i, ReduceOp op, DataType dtype) {
  if (dtype == DataType::kBool) {
    const bool and_op = op == ReduceOp::kMin || op == ReduceOp::kProduct;
    const bool marked = (i * 7 + rank * 3) % 5 == 0;
    return (and_op ? !marked : marked) ? 1.0 : 0.0;
  }
  if (op == ReduceOp::kProduct) return 1.0 + static_cast<double>((i + rank) % 2);
  return 1.0 + static_cast<double>((i * 7 + rank * 3) % 5);
}

std::vector<uint8_t> MakeInput(DataType dtype, int64_t count, int rank, ReduceOp op) {
  size_t esize = DataTypeSize(dtype);
  std::vector<uint8_t> bytes(static_cast<size_t>(count) * esize);
  for (int64_t i = 0; i < count; ++i) {
    StoreElement(dtype, bytes.data(), static_cast<size_t>(i), InputValue(rank, i, op, dtype));
  }
  return bytes;
}

double ReadElement(const std::vector<uint8_t>& bytes, DataType dtype, int64_t i) {
  return LoadElement(dtype, bytes.data(), static_cast<size_t>(i));
}

double ExpectedAllreduce(int size, int64_t i, ReduceOp op, DataType dtype) {
  double acc = InputValue(0, i, op, dtype);
  for (int r = 1; r < size; ++r) {
    double v = InputValue(r, i, op, dtype);
    acc = ReferenceReduce(op, acc, v, dtype);
  }
  if (op == ReduceOp::kAverage) {
    acc = IsFloatingPoint(dtype) ? acc / size : std::trunc(acc / size);
  }
  return acc;
}

std::string CheckAllreduce(const std::vector<uint8_t>& output, DataType dtype, int64_t count,
                           int size, ReduceOp op) {
  double tolerance = dtype == DataType::kFloat16    ? 1e-3
                     : dtype == DataType::kBFloat16 ? 8e-3
                     : dtype == DataType::kFloat32  ? 1e-6
                                                    : 1e-12;
  for (int64_t i = 0; i < count; ++i) {
    double got = ReadElement(output, dtype, i);
    double want = ExpectedAllreduce(size, i, op, dtype);
    if (std::fabs(got - want) > tolerance * std::max(1.0, std::fabs(want))) {
      return DataTypeName(dtype) + " " + ReduceOpName(op) + " of " + std::to_string(count) +
             " elements: element " + std::to_string(i) + " is " + std::to_string(got) +
             ", expected " + std::to_string(want);
    }
  }
  return "";
}

}  // namespace kolo::testing
