// kolo::libtorch under kolorun (1 and 2 ranks): the tensor adapter, and DistributedOptimizer's
// averaged gradients, accumulation and named-parameter checks. Every rank runs the same test
// cases in the same order; each arms a watchdog.
#include <torch/torch.h>
// c10's logging defines a CHECK of its own; Catch2's is the one these tests mean.
#undef CHECK
#include <kolo/libtorch.h>

#include <catch2/catch.hpp>
#include <chrono>

#include "kolo/kolo.h"
#include "tests/support/watchdog.h"

namespace {

using kolo::testing::Watchdog;
constexpr std::chrono::seconds kLimit{60};

void EnsureInit() {
  if (!kolo::is_initialized()) REQUIRE(kolo::init().ok());
}

// A linear model whose gradient on rank r's batch is known: loss = sum(w * (r + 1)).
struct Model : torch::nn::Module {
  Model() { w = register_parameter("w", torch::ones({3})); }
  at::Tensor w;
};

}  // namespace

TEST_CASE("ToTensorView: zero copy, dtypes, refusals") {
  Watchdog watchdog("ToTensorView", kLimit);
  at::Tensor t = torch::arange(6, torch::kInt32).reshape({2, 3});
  kolo::StatusOr<kolo::TensorView> view = kolo::libtorch::ToTensorView(t);
  REQUIRE(view.ok());
  CHECK(view->data == t.data_ptr());
  CHECK(view->dtype == kolo::DataType::kInt32);
  CHECK((view->shape == std::vector<int64_t>{2, 3}));
  CHECK(view->device.is_cpu());
  CHECK(kolo::libtorch::ToTensorView(torch::ones({2}, torch::kBFloat16))->dtype ==
        kolo::DataType::kBFloat16);
  CHECK(!kolo::libtorch::ToTensorView(t.t()).ok());  // not contiguous
  CHECK(!kolo::libtorch::ToTensorView(torch::ones({2}, torch::kComplexFloat)).ok());
}

TEST_CASE("DistributedOptimizer averages the gradients over the ranks") {
  Watchdog watchdog("averaged gradients", kLimit);
  EnsureInit();
  auto model = std::make_shared<Model>();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.5));
  auto optimizer = kolo::libtorch::DistributedOptimizer::Create(sgd, model->named_parameters());
  REQUIRE(optimizer.ok());
  (model->w * (kolo::rank() + 1)).sum().backward();
  kolo::StatusOr<bool> stepped = (*optimizer)->Step();
  REQUIRE(stepped.ok());
  CHECK(*stepped);
  double mean = (kolo::size() + 1) / 2.0;  // mean of 1..size
  CHECK(torch::allclose(model->w.grad(), torch::full({3}, mean)));
  CHECK(torch::allclose(model->w.detach(), torch::full({3}, 1.0 - 0.5 * mean)));
}

TEST_CASE("DistributedOptimizer accumulates backward_passes_per_step passes") {
  Watchdog watchdog("accumulation", kLimit);
  EnsureInit();
  auto model = std::make_shared<Model>();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(1.0));
  kolo::libtorch::DistributedOptimizerOptions options;
  options.backward_passes_per_step = 2;
  options.op = kolo::ReduceOp::kSum;
  auto optimizer =
      kolo::libtorch::DistributedOptimizer::Create(sgd, model->named_parameters(), options);
  REQUIRE(optimizer.ok());
  (model->w * (kolo::rank() + 1)).sum().backward();
  kolo::StatusOr<bool> first = (*optimizer)->Step();
  REQUIRE(first.ok());
  CHECK(!*first);
  (model->w * (kolo::rank() + 1)).sum().backward();
  kolo::StatusOr<bool> second = (*optimizer)->Step();
  REQUIRE(second.ok());
  CHECK(*second);
  double total = 2.0 * kolo::size() * (kolo::size() + 1) / 2.0;  // two passes, summed
  CHECK(torch::allclose(model->w.grad(), torch::full({3}, total)));
}

TEST_CASE("DistributedOptimizer refuses an unnamed parameter") {
  Watchdog watchdog("unnamed parameter", kLimit);
  EnsureInit();
  auto model = std::make_shared<Model>();
  at::Tensor extra = torch::ones({2}, torch::requires_grad());
  torch::optim::SGD sgd(std::vector<at::Tensor>{model->w, extra}, torch::optim::SGDOptions(1));
  auto optimizer = kolo::libtorch::DistributedOptimizer::Create(sgd, model->named_parameters());
  REQUIRE(!optimizer.ok());
  CHECK_THAT(optimizer.status().message(), Catch::Contains("not among named_parameters"));
}
