// The gradient tensors of real models, for kolo-bench's --model mode: what a training step
// hands kolo, with the layer sizes of the model. Pure data; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::bench {

struct ModelTensor {
  std::string name;  // "layer3.2.conv2.weight", as torchvision names the parameter
  int64_t elements = 0;
};

// The trainable parameters of `model` in forward order (backpropagation produces their
// gradients in the reverse order). Known: "resnet50" (torchvision's ResNet-50: 161 tensors,
// 25,557,032 parameters). Fails naming the known models otherwise.
StatusOr<std::vector<ModelTensor>> ModelGradients(const std::string& model);

}  // namespace kolo::bench
