// The digits example's bridge to kolo::GradientSync; see gradient_averager.h.
#include "examples/digits/gradient_averager.h"

#include <utility>

#include "kolo/kolo.h"

namespace kolo::examples {

StatusOr<std::unique_ptr<GradientAverager>> GradientAverager::Create(
    std::vector<NamedTensor>* gradients) {
  GradientSyncOptions options;
  options.op = ReduceOp::kAverage;
  options.name_prefix = "";  // the model already names its gradients "grad/w1", ...
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, GradientSync::Create(options));
  std::vector<std::string> names;
  for (NamedTensor& tensor : *gradients) {
    TensorView view{tensor.values.data(), DataType::kFloat32, tensor.shape, Device::Cpu()};
    KOLO_RETURN_IF_ERROR(sync->Register(tensor.name, view));
    names.push_back(tensor.name);
  }
  return std::unique_ptr<GradientAverager>(new GradientAverager(std::move(sync), std::move(names)));
}

StatusOr<float> GradientAverager::Average(float loss) {
  // A real backward pass yields the last layer's gradients first; each allreduce starts as
  // its gradient is marked ready.
  for (auto name = names_.rbegin(); name != names_.rend(); ++name) {
    Status ready = sync_->Ready(*name);
    if (!ready.ok()) {
      // Waits for the gradients already in flight, so none outlives this call; it fails too
      // (a gradient was not marked ready), which adds nothing to `ready`.
      sync_->Synchronize().status().IgnoreError();
      return ready;
    }
  }
  // The loss is not a gradient: a plain allreduce, enqueued while the gradients are in flight
  // so that it can join their fused transfer.
  TensorView loss_view{&loss, DataType::kFloat32, {}, Device::Cpu()};
  AllreduceOptions average;
  average.op = ReduceOp::kAverage;
  Status loss_status = allreduce("loss", loss_view, loss_view, average);
  // Synchronize even after a failed loss allreduce, so no gradient op is left in flight.
  KOLO_RETURN_IF_ERROR(sync_->Synchronize().status());
  if (!loss_status.ok()) return loss_status.WithContext("allreduce 'loss'");
  return loss;
}

}  // namespace kolo::examples
