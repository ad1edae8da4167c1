// kolo for libtorch (C++) programs: a torch::Tensor -> kolo::TensorView adapter, and
// DistributedOptimizer, Horovod's optimizer wrapper over torch::optim::Optimizer, built on
// kolo::GradientSync with hooks on each parameter's gradient accumulator (README "PyTorch").
//
// Threading: as a torch optimizer, one training thread uses a DistributedOptimizer; its hooks
// run during backward() on the thread that runs the CPU backward pass (the caller's).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "kolo/gradient_sync.h"
#include "kolo/kolo.h"

namespace kolo::libtorch {

// A view of `tensor` (no copy): contiguous, on the CPU or a CUDA device, of a dtype kolo has.
// The caller keeps the tensor alive until the op that uses the view completed.
StatusOr<TensorView> ToTensorView(const at::Tensor& tensor);

struct DistributedOptimizerOptions {
  ReduceOp op = ReduceOp::kAverage;  // kAverage or kSum
  int backward_passes_per_step = 1;
  bool fp16_compression = false;  // float32 gradients travel as float16
};

class DistributedOptimizer {
 public:
  // Wraps `optimizer` (which must outlive this object) over the default runtime (kolo::init()).
  // Every parameter of the optimizer must be among `named_parameters` (module.named_parameters()),
  // whose names must be the same on every rank. Gives each parameter a gradient of zeros if
  // it has none: kolo reduces the gradient buffers in place, so they must stay (see ZeroGrad).
  static StatusOr<std::unique_ptr<DistributedOptimizer>> Create(
      torch::optim::Optimizer& optimizer,
      const torch::OrderedDict<std::string, at::Tensor>& named_parameters,
      const DistributedOptimizerOptions& options = {});

  // After backward(): waits for the gradients' allreduces (started by the hooks as backward
  // produced them) and, on every backward_passes_per_step-th pass, writes the reduced
  // gradients and steps the wrapped optimizer; returns whether it stepped. On the other passes
  // it zeroes the gradients (kolo keeps their sum) and returns false.
  StatusOr<bool> Step();
  // Zeroes the gradients in place. Use this instead of optimizer.zero_grad(), whose default
  // frees them.
  void ZeroGrad();

 private:
  DistributedOptimizer(torch::optim::Optimizer& optimizer, std::unique_ptr<GradientSync> sync);

  torch::optim::Optimizer& optimizer_;
  std::unique_ptr<GradientSync> sync_;
  std::vector<at::Tensor> gradients_;
  // Held so that the accumulators (and their hooks) outlive each backward pass.
  std::vector<c10::intrusive_ptr<torch::autograd::Node>> accumulators_;
  Status hook_error_;  // the first failed Ready of this pass
};

}  // namespace kolo::libtorch
