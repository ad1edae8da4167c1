#include "tools/bench/model_gradients.h"

namespace kolo::bench {
namespace {

// A convolution's weight and the batch norm after it (weight and bias; running statistics are
// buffers, not gradients).
void AddConvBn(const std::string& conv, const std::string& bn, int64_t in, int64_t out,
               int64_t kernel, std::vector<ModelTensor>* tensors) {
  tensors->push_back({conv + ".weight", out * in * kernel * kernel});
  tensors->push_back({bn + ".weight", out});
  tensors->push_back({bn + ".bias", out});
}

// torchvision.models.resnet50: bottleneck blocks [3, 4, 6, 3], expansion 4.
std::vector<ModelTensor> Resnet50() {
  std::vector<ModelTensor> tensors;
  AddConvBn("conv1", "bn1", 3, 64, 7, &tensors);
  const int blocks[] = {3, 4, 6, 3};
  int64_t in = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const int64_t planes = int64_t{64} << layer;
    for (int b = 0; b < blocks[layer]; ++b) {
      const std::string prefix = "layer" + std::to_string(layer + 1) + "." + std::to_string(b);
      AddConvBn(prefix + ".conv1", prefix + ".bn1", in, planes, 1, &tensors);
      AddConvBn(prefix + ".conv2", prefix + ".bn2", planes, planes, 3, &tensors);
      AddConvBn(prefix + ".conv3", prefix + ".bn3", planes, planes * 4, 1, &tensors);
      if (b == 0) {
        AddConvBn(prefix + ".downsample.0", prefix + ".downsample.1", in, planes * 4, 1, &tensors);
      }
      in = planes * 4;
    }
  }
  tensors.push_back({"fc.weight", 1000 * in});
  tensors.push_back({"fc.bias", 1000});
  return tensors;
}

}  // namespace

StatusOr<std::vector<ModelTensor>> ModelGradients(const std::string& model) {
  if (model == "resnet50") return Resnet50();
  return InvalidArgument("unknown model '" + model + "' (known: resnet50)");
}

}  // namespace kolo::bench
