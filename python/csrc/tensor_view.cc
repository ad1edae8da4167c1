#include "python/csrc/tensor_view.h"

namespace kolo::torch_ext {

std::optional<DataType> ToKoloType(at::ScalarType type) {
  switch (type) {
    case at::kByte:
      return DataType::kUInt8;
    case at::kChar:
      return DataType::kInt8;
    case at::kShort:
      return DataType::kInt16;
    case at::kInt:
      return DataType::kInt32;
    case at::kLong:
      return DataType::kInt64;
    case at::kHalf:
      return DataType::kFloat16;
    case at::kBFloat16:
      return DataType::kBFloat16;
    case at::kFloat:
      return DataType::kFloat32;
    case at::kDouble:
      return DataType::kFloat64;
    case at::kBool:
      return DataType::kBool;
    default:
      return std::nullopt;
  }
}

std::optional<TensorView> ToView(const at::Tensor& tensor, const std::string& what,
                                 std::string* error) {
  std::optional<DataType> dtype = ToKoloType(tensor.scalar_type());
  if (!dtype) {
    *error = what + ": kolo has no counterpart of torch dtype " +
             std::string(c10::toString(tensor.scalar_type()));
    return std::nullopt;
  }
  if (!tensor.is_contiguous()) {
    *error = what + ": tensor is not contiguous";
    return std::nullopt;
  }
  TensorView view;
  if (tensor.is_cuda()) {
    view.device = Device::Cuda(tensor.get_device());
  } else if (!tensor.is_cpu()) {
    *error = what + ": tensors on " + tensor.device().str() + " are not supported (cpu, cuda)";
    return std::nullopt;
  }
  view.data = tensor.data_ptr();
  view.dtype = *dtype;
  view.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
  return view;
}

}  // namespace kolo::torch_ext
