// kolo-libtorch-digits: data-parallel training of a small MLP on the 8x8 digits with libtorch
// and kolo::libtorch::DistributedOptimizer. Run on 4 ranks:
//   build/bin/kolorun -np 4 build/bin/kolo-libtorch-digits [epochs]
// Ends with one line per rank; exits non-zero unless every rank holds the same weights.
#include <kolo/libtorch.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kolo/kolo.h"

namespace {

bool Check(const kolo::Status& status, const char* what) {
  if (status.ok()) return true;
  std::fprintf(stderr, "[%d] %s: %s\n", kolo::rank(), what, status.ToString().c_str());
  return false;
}

bool LoadDigits(const std::string& path, at::Tensor* features, at::Tensor* labels) {
  std::ifstream in(path);
  std::vector<float> pixels;
  std::vector<int64_t> classes;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::stringstream fields(line);
    std::string field;
    for (int i = 0; i < 65 && std::getline(fields, field, ','); ++i) {
      if (i < 64) {
        pixels.push_back(std::stof(field) / 16.0f);
      } else {
        classes.push_back(std::stol(field));
      }
    }
  }
  if (classes.empty() || pixels.size() != classes.size() * 64) return false;
  int64_t n = static_cast<int64_t>(classes.size());
  *features = torch::from_blob(pixels.data(), {n, 64}).clone();
  *labels = torch::from_blob(classes.data(), {n}, torch::kLong).clone();
  return true;
}

// Rank 0's weights everywhere.
bool BroadcastWeights(torch::nn::Sequential& model) {
  for (auto& item : model->named_parameters()) {
    kolo::StatusOr<kolo::TensorView> view = kolo::libtorch::ToTensorView(item.value());
    if (!view.ok() || !Check(kolo::broadcast("init/" + item.key(), *view, 0), "broadcast")) {
      return false;
    }
  }
  return true;
}

// `epochs` passes over this rank's `shard` of the rows, in batches of 16.
bool Train(torch::nn::Sequential& model, kolo::libtorch::DistributedOptimizer& optimizer,
           const at::Tensor& features, const at::Tensor& labels, const at::Tensor& shard,
           int epochs) {
  const int64_t batch = 16;
  int64_t steps = shard.size(0) / batch;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    at::Tensor permuted = shard.index_select(
        0, torch::randperm(shard.size(0), torch::Generator(at::detail::createCPUGenerator(epoch))));
    for (int64_t step = 0; step < steps; ++step) {
      at::Tensor rows = permuted.slice(0, step * batch, (step + 1) * batch);
      optimizer.ZeroGrad();
      at::Tensor loss = torch::nn::functional::cross_entropy(
          model->forward(features.index_select(0, rows)), labels.index_select(0, rows));
      loss.backward();
      if (!Check(optimizer.Step().status(), "step")) return false;
    }
  }
  return true;
}

// Whether every rank holds the same weights: the elementwise max over the ranks equals the min.
bool IdenticalOnAllRanks(torch::nn::Sequential& model, bool* identical) {
  std::vector<at::Tensor> parts;
  for (const at::Tensor& p : model->parameters()) parts.push_back(p.detach().reshape({-1}));
  at::Tensor flat = torch::cat(parts);
  at::Tensor high = flat.clone(), low = flat.clone();
  kolo::AllreduceOptions max_options, min_options;
  max_options.op = kolo::ReduceOp::kMax;
  min_options.op = kolo::ReduceOp::kMin;
  auto high_view = kolo::libtorch::ToTensorView(high);
  auto low_view = kolo::libtorch::ToTensorView(low);
  if (!Check(kolo::allreduce("check/max", *high_view, *high_view, max_options), "allreduce") ||
      !Check(kolo::allreduce("check/min", *low_view, *low_view, min_options), "allreduce")) {
    return false;
  }
  *identical = torch::equal(high, low) && torch::equal(high, flat);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = argc > 1 ? std::atoi(argv[1]) : 20;
  if (!Check(kolo::init(), "init")) return 1;
  int rank = kolo::rank(), size = kolo::size();
  torch::manual_seed(1234 + rank);  // different on purpose: the broadcast below fixes it
  torch::set_num_threads(1);

  at::Tensor features, labels;
  if (!LoadDigits(KOLO_DIGITS_CSV, &features, &labels)) {
    std::fprintf(stderr, "cannot read %s\n", KOLO_DIGITS_CSV);
    return 1;
  }
  at::Tensor order =
      torch::randperm(labels.size(0), torch::Generator(at::detail::createCPUGenerator(7)));
  at::Tensor test = order.slice(0, 0, 297);
  at::Tensor shard = order.slice(0, 297).slice(0, rank, c10::nullopt, size);

  torch::nn::Sequential model(torch::nn::Linear(64, 64), torch::nn::ReLU(),
                              torch::nn::Linear(64, 10));
  if (!BroadcastWeights(model)) return 1;
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05 * size).momentum(0.9));
  auto optimizer = kolo::libtorch::DistributedOptimizer::Create(sgd, model->named_parameters());
  if (!Check(optimizer.status(), "DistributedOptimizer")) return 1;
  if (!Train(model, **optimizer, features, labels, shard, epochs)) return 1;

  torch::NoGradGuard no_grad;
  double accuracy = model->forward(features.index_select(0, test))
                        .argmax(1)
                        .eq(labels.index_select(0, test))
                        .to(torch::kFloat64)
                        .mean()
                        .item<double>();
  bool identical = false;
  if (!IdenticalOnAllRanks(model, &identical)) return 1;
  std::printf("final: accuracy=%.4f identical_on_all_%d_ranks=%s\n", accuracy, size,
              identical ? "true" : "false");
  std::fflush(stdout);
  if (!Check(kolo::shutdown(), "shutdown")) return 1;
  return identical ? 0 : 1;
}
