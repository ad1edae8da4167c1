// Data types, reduce ops, devices and the non-owning TensorView of kolo's public API.
// Plain value types; safe to copy between threads. kolo never owns the memory a TensorView
// points at: it must stay valid until the op's callback has run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kolo {

enum class DataType : int32_t {
  kUInt8 = 0,
  kInt8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat16 = 4,
  kBFloat16 = 5,
  kFloat32 = 6,
  kFloat64 = 7,
  // Appended after the first eight so that their numbers (on the wire, in the C API) stay.
  kUInt16 = 8,
  kInt16 = 9,
  // One byte per element, 0 (false) or 1 (true); kolo reads any non-zero byte as true and
  // writes 0 or 1. Sum and max are logical or, min and product logical and (as in Horovod
  // and NCCL); average and scale factors other than 1 are refused.
  kBool = 10,
};
constexpr int kNumDataTypes = 11;

// Bytes per element; 0 for a value outside the enum.
size_t DataTypeSize(DataType dtype);
// "float32", "bfloat16", "bool", ...; "dtype(<n>)" for a value outside the enum.
std::string DataTypeName(DataType dtype);
bool IsFloatingPoint(DataType dtype);
bool IsValidDataType(int32_t value);

enum class ReduceOp : int32_t {
  kSum = 0,
  kAverage = 1,  // sum, then divided once by the number of contributing ranks
  kMin = 2,
  kMax = 3,
  kProduct = 4,
};
std::string ReduceOpName(ReduceOp op);
bool IsValidReduceOp(int32_t value);

// The collective an op performs. Only kAllreduce is implemented in v0.1.
enum class OpType : int32_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  // kolo's own, never a user's op: the collective add_process_set / remove_process_set calls,
  // negotiated over the global set like any op (docs/PROTOCOL.md, "Process sets").
  kAddProcessSet = 7,
  kRemoveProcessSet = 8,
};
std::string OpTypeName(OpType op);  // "allreduce", ...

struct Device {
  static constexpr int kCpu = -1;
  int index = kCpu;  // -1: host memory; >= 0: CUDA device ordinal
  bool is_cpu() const { return index == kCpu; }
  static Device Cpu() { return Device{}; }
  static Device Cuda(int ordinal) { return Device{ordinal}; }
};
inline bool operator==(Device a, Device b) {
  return a.index == b.index;
}
inline bool operator!=(Device a, Device b) {
  return !(a == b);
}
std::string DeviceName(Device device);  // "cpu", "cuda:0"

// A non-owning view of a dense, contiguous, row-major tensor.
struct TensorView {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;  // empty shape: a scalar (one element)
  Device device;

  int64_t num_elements() const;  // product of shape; 1 for a scalar
  size_t num_bytes() const { return static_cast<size_t>(num_elements()) * DataTypeSize(dtype); }
};

// "[2, 3]"
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace kolo
