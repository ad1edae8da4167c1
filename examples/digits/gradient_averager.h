// GradientAverager: connects the digits model's named gradients to kolo::GradientSync on the
// default runtime. It registers each gradient buffer once, marks them ready in the order a
// backward pass produces them (last layer first), so each allreduce starts at once and all can
// be fused, averages the loss alongside, and waits. One training thread; not thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "examples/digits/mlp.h"
#include "kolo/gradient_sync.h"
#include "kolo/status.h"

namespace kolo::examples {

class GradientAverager {
 public:
  // Registers every tensor of `gradients` under its name ("grad/w1", the kolo op name). The
  // vector and its buffers must not be reallocated while the averager lives. Fails if kolo is
  // not initialized or a tensor cannot be registered.
  static StatusOr<std::unique_ptr<GradientAverager>> Create(std::vector<NamedTensor>* gradients);

  // Replaces each gradient by its average over all ranks, and returns the average of `loss`.
  // Blocks until done; returns the first error, naming the tensor. After an error the caller
  // must kolo::shutdown() (which fails whatever is pending) before freeing the gradients.
  StatusOr<float> Average(float loss);

 private:
  GradientAverager(std::unique_ptr<GradientSync> sync, std::vector<std::string> names)
      : sync_(std::move(sync)), names_(std::move(names)) {}

  const std::unique_ptr<GradientSync> sync_;
  const std::vector<std::string> names_;  // in registration (forward) order
};

}  // namespace kolo::examples
