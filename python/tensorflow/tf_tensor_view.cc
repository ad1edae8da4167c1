#include "python/tensorflow/tf_tensor_view.h"

#include <optional>

namespace kolo::tf_ext {
namespace {

std::optional<DataType> ToKoloType(tensorflow::DataType dtype) {
  switch (dtype) {
    case tensorflow::DT_UINT8:
      return DataType::kUInt8;
    case tensorflow::DT_INT8:
      return DataType::kInt8;
    case tensorflow::DT_UINT16:
      return DataType::kUInt16;
    case tensorflow::DT_INT16:
      return DataType::kInt16;
    case tensorflow::DT_INT32:
      return DataType::kInt32;
    case tensorflow::DT_INT64:
      return DataType::kInt64;
    case tensorflow::DT_HALF:
      return DataType::kFloat16;
    case tensorflow::DT_BFLOAT16:
      return DataType::kBFloat16;
    case tensorflow::DT_FLOAT:
      return DataType::kFloat32;
    case tensorflow::DT_DOUBLE:
      return DataType::kFloat64;
    case tensorflow::DT_BOOL:
      return DataType::kBool;
    default:
      return std::nullopt;
  }
}

}  // namespace

absl::Status ToView(const tensorflow::Tensor& tensor, const std::string& what, TensorView* view) {
  std::optional<DataType> dtype = ToKoloType(tensor.dtype());
  if (!dtype) {
    return absl::InvalidArgumentError(what + ": kolo has no counterpart of TensorFlow dtype " +
                                      tensorflow::DataTypeString(tensor.dtype()));
  }
  view->data = tensor.data();
  view->dtype = *dtype;
  view->shape = Dims(tensor.shape());
  view->device = Device::Cpu();
  return absl::OkStatus();
}

absl::Status ToTfStatus(const Status& status) {
  const std::string& message = status.message();
  switch (status.code()) {
    case StatusCode::kOk:
      return absl::OkStatus();
    case StatusCode::kInvalidArgument:
      return absl::InvalidArgumentError(message);
    case StatusCode::kFailedPrecondition:
    case StatusCode::kMismatch:
      return absl::FailedPreconditionError(message);
    case StatusCode::kAborted:
    case StatusCode::kShutdown:
      return absl::AbortedError(message);
    case StatusCode::kDeadlineExceeded:
      return absl::DeadlineExceededError(message);
    case StatusCode::kUnavailable:
      return absl::UnavailableError(message);
    case StatusCode::kInternal:
      return absl::InternalError(message);
  }
  return absl::UnknownError(message);
}

absl::Status ToReduceOp(int horovod_op, ReduceOp* op) {
  switch (horovod_op) {
    case 0:
      *op = ReduceOp::kAverage;
      return absl::OkStatus();
    case 1:
      *op = ReduceOp::kSum;
      return absl::OkStatus();
    case 2:
      return absl::UnimplementedError(
          "kolo.tensorflow has no Adasum reduction (kolo.torch has one, from an allgather)");
    case 3:
      *op = ReduceOp::kMin;
      return absl::OkStatus();
    case 4:
      *op = ReduceOp::kMax;
      return absl::OkStatus();
    case 5:
      *op = ReduceOp::kProduct;
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown reduce_op " + std::to_string(horovod_op) +
                                    " (Horovod's: Average 0, Sum 1, Min 3, Max 4, Product 5)");
}

absl::Status TensorNames(tensorflow::OpKernelContext* context, int index, int count,
                         std::vector<std::string>* names) {
  const tensorflow::Tensor& input = context->input(index);
  if (input.NumElements() != count || input.dims() > 1) {
    return absl::InvalidArgumentError("expected " + std::to_string(count) +
                                      " tensor names, got a tensor of shape " +
                                      input.shape().DebugString());
  }
  names->clear();
  const auto flat = input.flat<tensorflow::tstring>();
  for (int i = 0; i < count; ++i) names->emplace_back(flat(i));
  return absl::OkStatus();
}

std::vector<int64_t> Dims(const tensorflow::TensorShape& shape) {
  std::vector<int64_t> dims;
  dims.reserve(shape.dims());
  for (int i = 0; i < shape.dims(); ++i) dims.push_back(shape.dim_size(i));
  return dims;
}

absl::Status ToShape(const std::vector<int64_t>& dims, tensorflow::TensorShape* shape) {
  return tensorflow::TensorShape::BuildTensorShape(dims, shape);
}

}  // namespace kolo::tf_ext
