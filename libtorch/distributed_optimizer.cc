#include <kolo/libtorch.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <map>
#include <utility>

namespace kolo::libtorch {

StatusOr<TensorView> ToTensorView(const at::Tensor& tensor) {
  TensorView view;
  switch (tensor.scalar_type()) {
    case at::kByte:
      view.dtype = DataType::kUInt8;
      break;
    case at::kChar:
      view.dtype = DataType::kInt8;
      break;
    case at::kShort:
      view.dtype = DataType::kInt16;
      break;
    case at::kInt:
      view.dtype = DataType::kInt32;
      break;
    case at::kLong:
      view.dtype = DataType::kInt64;
      break;
    case at::kHalf:
      view.dtype = DataType::kFloat16;
      break;
    case at::kBFloat16:
      view.dtype = DataType::kBFloat16;
      break;
    case at::kFloat:
      view.dtype = DataType::kFloat32;
      break;
    case at::kDouble:
      view.dtype = DataType::kFloat64;
      break;
    case at::kBool:
      view.dtype = DataType::kBool;
      break;
    default:
      return InvalidArgument(std::string("kolo has no counterpart of torch dtype ") +
                             c10::toString(tensor.scalar_type()));
  }
  if (!tensor.is_contiguous()) return InvalidArgument("tensor is not contiguous");
  if (tensor.is_cuda()) {
    view.device = Device::Cuda(tensor.get_device());
  } else if (!tensor.is_cpu()) {
    return InvalidArgument("tensors on " + tensor.device().str() + " are not supported");
  }
  view.data = tensor.data_ptr();
  view.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
  return view;
}

DistributedOptimizer::DistributedOptimizer(torch::optim::Optimizer& optimizer,
                                           std::unique_ptr<GradientSync> sync)
    : optimizer_(optimizer), sync_(std::move(sync)) {}

StatusOr<std::unique_ptr<DistributedOptimizer>> DistributedOptimizer::Create(
    torch::optim::Optimizer& optimizer,
    const torch::OrderedDict<std::string, at::Tensor>& named_parameters,
    const DistributedOptimizerOptions& options) {
  GradientSyncOptions sync_options;
  sync_options.op = options.op;
  sync_options.backward_passes_per_step = options.backward_passes_per_step;
  sync_options.fp16_compression = options.fp16_compression;
  StatusOr<std::unique_ptr<GradientSync>> sync = GradientSync::Create(sync_options);
  if (!sync.ok()) return sync.status();
  std::unique_ptr<DistributedOptimizer> self(new DistributedOptimizer(optimizer, std::move(*sync)));

  std::map<const void*, std::string> names;
  for (const auto& item : named_parameters) {
    if (!names.emplace(item.value().unsafeGetTensorImpl(), item.key()).second) {
      return InvalidArgument("parameter '" + item.key() + "' is named twice");
    }
  }
  for (auto& group : optimizer.param_groups()) {
    for (at::Tensor& parameter : group.params()) {
      auto name = names.find(parameter.unsafeGetTensorImpl());
      if (name == names.end()) {
        return InvalidArgument("a parameter of the optimizer (shape " +
                               ShapeToString(parameter.sizes().vec()) +
                               ") is not among named_parameters");
      }
      if (!parameter.requires_grad()) continue;
      if (!parameter.grad().defined()) parameter.mutable_grad() = torch::zeros_like(parameter);
      at::Tensor gradient = parameter.grad();
      StatusOr<TensorView> view = ToTensorView(gradient);
      if (!view.ok()) return view.status().WithContext("parameter '" + name->second + "'");
      Status registered = self->sync_->Register(name->second, *view);
      if (!registered.ok()) return registered;
      self->gradients_.push_back(gradient);
      // The accumulator's post hook runs once the gradient is summed into parameter.grad().
      c10::intrusive_ptr<torch::autograd::Node> accumulator =
          torch::autograd::impl::grad_accumulator(parameter);
      DistributedOptimizer* raw = self.get();
      std::string key = name->second;
      accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [raw, key](const torch::autograd::variable_list& outputs,
                     const torch::autograd::variable_list&) {
            Status ready = raw->sync_->Ready(key);
            if (!ready.ok() && raw->hook_error_.ok()) raw->hook_error_ = ready;
            return outputs;
          }));
      self->accumulators_.push_back(std::move(accumulator));
    }
  }
  return self;
}

StatusOr<bool> DistributedOptimizer::Step() {
  if (!hook_error_.ok()) {
    Status error = hook_error_;
    hook_error_ = Status();
    return error;
  }
  StatusOr<bool> synchronized = sync_->Synchronize();
  if (!synchronized.ok()) return synchronized.status();
  if (!*synchronized) {
    ZeroGrad();  // this pass's gradients are in kolo's accumulators
    return false;
  }
  optimizer_.step();
  return true;
}

void DistributedOptimizer::ZeroGrad() {
  torch::NoGradGuard no_grad;
  for (at::Tensor& gradient : gradients_) gradient.zero_();
}

}  // namespace kolo::libtorch
