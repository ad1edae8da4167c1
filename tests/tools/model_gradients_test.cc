#include "tools/bench/model_gradients.h"

#include <catch2/catch.hpp>
#include <set>

namespace kolo::bench {
namespace {

TEST_CASE("ResNet-50's gradients are torchvision's 161 parameters", "[tools][bench]") {
  StatusOr<std::vector<ModelTensor>> tensors = ModelGradients("resnet50");
  REQUIRE(tensors.ok());
  REQUIRE(tensors->size() == 161);
  int64_t total = 0;
  std::set<std::string> names;
  for (const ModelTensor& t : *tensors) {
    total += t.elements;
    names.insert(t.name);
  }
  CHECK(total == 25557032);  // torchvision: sum(p.numel() for p in resnet50().parameters())
  CHECK(names.size() == 161);
  CHECK(tensors->front().name == "conv1.weight");
  CHECK(tensors->front().elements == 64 * 3 * 7 * 7);
  CHECK(tensors->back().name == "fc.bias");
  CHECK(names.count("layer4.0.downsample.0.weight") == 1);
}

TEST_CASE("An unknown model is refused by name", "[tools][bench]") {
  StatusOr<std::vector<ModelTensor>> tensors = ModelGradients("vgg");
  REQUIRE_FALSE(tensors.ok());
  CHECK(tensors.status().message() == "unknown model 'vgg' (known: resnet50)");
}

}  // namespace
}  // namespace kolo::bench
