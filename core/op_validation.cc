#include "core/op_validation.h"

#include <algorithm>
#include <cmath>

#include "core/wire_limits.h"

namespace kolo {
namespace {

// The checks are on every op's path: `what()` names the tensor in an error message and is
// called only to build one (a small op's enqueue is a few hundred ns; the names cost a third).
template <typename What>
Status CheckTensor(const What& what, const TensorView& t) {
  if (!IsValidDataType(static_cast<int32_t>(t.dtype))) {
    return InvalidArgument(what() + " has an unsupported data type " + DataTypeName(t.dtype));
  }
  for (int64_t d : t.shape) {
    if (d < 0) {
      return InvalidArgument(what() + " has a negative dimension in shape " +
                             ShapeToString(t.shape));
    }
  }
  // Before anything multiplies the dimensions: their product may overflow int64.
  const std::string oversize = DescribeOversize(t.shape, t.dtype);
  if (!oversize.empty()) return InvalidArgument(what() + " has " + oversize);
  if (t.device.index < Device::kCpu) {
    return InvalidArgument(what() + " is on an invalid device index " +
                           std::to_string(t.device.index) + " (-1 is the CPU, 0.. a GPU)");
  }
  if (t.data == nullptr && t.num_elements() > 0) {
    return InvalidArgument(what() + " has a null data pointer for " +
                           std::to_string(t.num_elements()) + " elements");
  }
  return Status::Ok();
}

// A tensor name must be non-empty and valid UTF-8: the control protocol carries it as a
// protobuf string, which the controller would refuse to parse (and lose the rank).
Status CheckName(const std::string& op, const std::string& name) {
  if (name.empty()) return InvalidArgument(op + " needs a non-empty tensor name");
  const int64_t offset = FirstInvalidUtf8(name);
  if (offset >= 0) {
    return InvalidArgument(op + ": the tensor name is not valid UTF-8 (byte " +
                           std::to_string(offset) + " of " + std::to_string(name.size()) +
                           " does not start a well-formed UTF-8 sequence)");
  }
  return Status::Ok();
}

// The metadata every op shares: name, op and the tensor's dtype, shape and device.
TensorMeta MetaOf(const std::string& name, OpType op, const TensorView& tensor) {
  TensorMeta meta;
  meta.name = name;
  meta.op = op;
  meta.dtype = tensor.dtype;
  meta.shape = tensor.shape;
  meta.device = tensor.device;
  return meta;
}

// bool reduces by logical or / and: it has no average, and scaling a truth value means nothing.
Status CheckBoolReduction(const std::string& what, DataType dtype,
                          const AllreduceOptions& options) {
  if (dtype != DataType::kBool) return Status::Ok();
  if (options.op == ReduceOp::kAverage) {
    return InvalidArgument(what +
                           ": bool tensors have no average; use sum or max (logical or) or min or "
                           "product (logical and)");
  }
  if (options.prescale != 1.0 || options.postscale != 1.0) {
    return InvalidArgument(what + ": bool tensors cannot be scaled (prescale " +
                           std::to_string(options.prescale) + ", postscale " +
                           std::to_string(options.postscale) + ")");
  }
  return Status::Ok();
}

// The local checks of a reduction (allreduce, and reducescatter on the whole input; with
// default options, the input and output of an out-of-place broadcast); errors name `op`.
StatusOr<TensorMeta> ValidateReduction(OpType op, const std::string& name, const TensorView& input,
                                       const TensorView& output, const AllreduceOptions& options) {
  KOLO_RETURN_IF_ERROR(CheckName(OpTypeName(op), name));
  auto what = [&] { return OpTypeName(op) + " '" + name + "'"; };
  KOLO_RETURN_IF_ERROR(CheckTensor([&] { return what() + ": input"; }, input));
  KOLO_RETURN_IF_ERROR(CheckTensor([&] { return what() + ": output"; }, output));
  if (input.dtype != output.dtype) {
    return InvalidArgument(what() + ": input is " + DataTypeName(input.dtype) + " but output is " +
                           DataTypeName(output.dtype));
  }
  if (input.num_elements() != output.num_elements()) {
    return InvalidArgument(what() + ": input shape " + ShapeToString(input.shape) +
                           " and output shape " + ShapeToString(output.shape) +
                           " hold different numbers of elements");
  }
  if (input.device != output.device) {
    return InvalidArgument(what() + ": input is on " + DeviceName(input.device) +
                           " but output is on " + DeviceName(output.device));
  }
  if (!IsValidReduceOp(static_cast<int32_t>(options.op))) {
    return InvalidArgument(what() + ": unsupported reduce op " + ReduceOpName(options.op));
  }
  for (double factor : {options.prescale, options.postscale}) {
    if (!std::isfinite(factor)) {
      return InvalidArgument(what() + ": scale factors must be finite");
    }
    // Integer tensors scale in double, truncated. (NCCL cannot: the GPU path's nccl
    // refuses that at enqueue, ops/gpu_plane/gpu_plane.cc.)
  }
  if (input.dtype == DataType::kBool) {
    KOLO_RETURN_IF_ERROR(CheckBoolReduction(what(), input.dtype, options));
  }
  TensorMeta meta = MetaOf(name, op, input);
  meta.reduce_op = options.op;
  meta.prescale = options.prescale;
  meta.postscale = options.postscale;
  return meta;
}

// The local checks of an op that concatenates along dimension 0 (allgather, alltoall).
StatusOr<TensorMeta> ValidateRows(OpType op, const std::string& name, const TensorView& input,
                                  const Allocator& allocate) {
  KOLO_RETURN_IF_ERROR(CheckName(OpTypeName(op), name));
  auto what = [&] { return OpTypeName(op) + " '" + name + "'"; };
  KOLO_RETURN_IF_ERROR(CheckTensor(what, input));
  if (input.shape.empty()) {
    return InvalidArgument(what() +
                           ": a scalar cannot be split or concatenated along dimension 0; pass "
                           "a tensor of shape [1]");
  }
  if (!allocate) return InvalidArgument(what() + ": needs an output allocator");
  return MetaOf(name, op, input);
}

}  // namespace

StatusOr<TensorMeta> ValidateAllreduce(const std::string& name, const TensorView& input,
                                       const TensorView& output, const AllreduceOptions& options) {
  return ValidateReduction(OpType::kAllreduce, name, input, output, options);
}

StatusOr<TensorMeta> ValidateAllgather(const std::string& name, const TensorView& input,
                                       const Allocator& allocate) {
  return ValidateRows(OpType::kAllgather, name, input, allocate);
}

std::vector<int64_t> SplitRows(int64_t rows, int n) {
  std::vector<int64_t> split(n, rows / n);
  for (int i = 0; i < rows % n; ++i) ++split[i];
  return split;
}

std::vector<int64_t> ReducescatterShape(const std::vector<int64_t>& input_shape, int rank,
                                        int size) {
  std::vector<int64_t> shape = input_shape.empty() ? std::vector<int64_t>{1} : input_shape;
  if (size > 0 && rank >= 0 && rank < size) shape[0] = SplitRows(shape[0], size)[rank];
  return shape;
}

StatusOr<TensorMeta> ValidateReducescatter(const std::string& name, const TensorView& input,
                                           const TensorView& output,
                                           const AllreduceOptions& options, int rank, int size) {
  // The same local checks as allreduce, then the output must be this rank's part.
  TensorView whole = output;
  whole.shape = input.shape;
  // An empty part (more ranks than rows) may come without memory, e.g. an empty vector's data().
  // (A zero dimension, tested without multiplying: the shape is not checked for overflow yet.)
  const bool empty_part =
      std::find(output.shape.begin(), output.shape.end(), int64_t{0}) != output.shape.end();
  if (empty_part && output.data == nullptr) whole.data = input.data;
  KOLO_ASSIGN_OR_RETURN(TensorMeta meta,
                        ValidateReduction(OpType::kReducescatter, name, input, whole, options));
  if (input.shape.empty()) {
    return InvalidArgument("reducescatter '" + name +
                           "': a scalar cannot be split along dimension 0; pass a tensor of "
                           "shape [1]");
  }
  const std::vector<int64_t> part = ReducescatterShape(input.shape, rank, size);
  int64_t part_elements = 1;
  for (int64_t d : part) part_elements *= d;
  if (output.num_elements() != part_elements) {
    return InvalidArgument("reducescatter '" + name + "': rank " + std::to_string(rank) +
                           " receives " + ShapeToString(part) + " of input " +
                           ShapeToString(input.shape) + ", but the output holds " +
                           std::to_string(output.num_elements()) + " elements");
  }
  return meta;
}

StatusOr<TensorMeta> ValidateAlltoall(const std::string& name, const TensorView& input,
                                      const std::vector<int64_t>& splits, const Allocator& allocate,
                                      int size) {
  KOLO_ASSIGN_OR_RETURN(TensorMeta meta, ValidateRows(OpType::kAlltoall, name, input, allocate));
  const std::string what = "alltoall '" + name + "'";
  const int64_t rows = input.shape[0];
  std::vector<int64_t> resolved = splits;
  if (resolved.empty()) {
    if (rows % size != 0) {
      return InvalidArgument(what + ": " + std::to_string(rows) +
                             " rows do not split evenly over " + std::to_string(size) +
                             " ranks; pass splits");
    }
    resolved.assign(size, rows / size);
  }
  if (static_cast<int>(resolved.size()) != size) {
    return InvalidArgument(what + ": " + std::to_string(resolved.size()) + " splits for " +
                           std::to_string(size) + " ranks");
  }
  int64_t sum = 0;
  for (int64_t s : resolved) {
    if (s < 0) return InvalidArgument(what + ": a split is negative (" + std::to_string(s) + ")");
    sum += s;
  }
  if (sum != rows) {
    return InvalidArgument(what + ": the splits add up to " + std::to_string(sum) +
                           " rows but the input has " + std::to_string(rows));
  }
  meta.splits = std::move(resolved);
  return meta;
}

StatusOr<TensorMeta> ValidateBroadcast(const std::string& name, const TensorView& tensor, int root,
                                       int size) {
  KOLO_RETURN_IF_ERROR(CheckName("broadcast", name));
  auto what = [&] { return "broadcast '" + name + "'"; };
  KOLO_RETURN_IF_ERROR(CheckTensor(what, tensor));
  if (root < 0 || root >= size) {
    return InvalidArgument(what() + ": root rank " + std::to_string(root) +
                           " is not a rank of this job of " + std::to_string(size));
  }
  TensorMeta meta = MetaOf(name, OpType::kBroadcast, tensor);
  meta.root = root;
  return meta;
}

StatusOr<TensorMeta> ValidateBroadcast(const std::string& name, const TensorView& input,
                                       const TensorView& output, int root, int size) {
  if (input.data == output.data && input.dtype == output.dtype && input.shape == output.shape &&
      input.device == output.device) {
    return ValidateBroadcast(name, output, root, size);  // in place
  }
  // A reduction's input/output checks; its default options (sum, no scaling) are a no-op here.
  KOLO_ASSIGN_OR_RETURN(TensorMeta meta,
                        ValidateReduction(OpType::kBroadcast, name, input, output, {}));
  if (root < 0 || root >= size) {
    return InvalidArgument("broadcast '" + name + "': root rank " + std::to_string(root) +
                           " is not a rank of this job of " + std::to_string(size));
  }
  meta.shape = output.shape;
  meta.root = root;
  return meta;
}

TensorMeta BarrierMeta(const std::string& name, OpType op) {
  TensorMeta meta;
  meta.name = name;
  meta.op = op;
  meta.dtype = DataType::kUInt8;
  meta.shape = {0};
  return meta;
}

}  // namespace kolo
