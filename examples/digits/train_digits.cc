// kolo-train-digits: a small, real data-parallel training job on kolo's public API. Every rank
// holds the same two-layer perceptron; each global batch is split evenly across the ranks, and
// the gradients (one kolo tensor per parameter, "grad/w1" ...) are averaged with
// kolo::GradientSync before an identical SGD step everywhere. Run it alone or under kolorun:
//   kolo-train-digits            kolorun -np 4 kolo-train-digits
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "examples/digits/digits_data.h"
#include "examples/digits/gradient_averager.h"
#include "examples/digits/mlp.h"
#include "examples/digits/train_options.h"
#include "kolo/kolo.h"

namespace kolo::examples {
namespace {

// Averages the local gradients and loss across ranks, then takes one SGD step; returns the
// global batch's mean loss. `averager` is created on the first step, once `gradients` has its final
// layout.
StatusOr<float> TrainStep(const TrainOptions& options, const Dataset& train, const int* local_batch,
                          int local_size, std::unique_ptr<GradientAverager>* averager, Mlp* model,
                          std::vector<NamedTensor>* gradients) {
  const float local_loss = model->LossAndGradients(train, local_batch, local_size, gradients);
  if (*averager == nullptr) {
    KOLO_ASSIGN_OR_RETURN(std::unique_ptr<GradientAverager> created,
                          GradientAverager::Create(gradients));
    *averager = std::move(created);
  }
  KOLO_ASSIGN_OR_RETURN(float loss, (*averager)->Average(local_loss));
  model->SgdStep(*gradients, static_cast<float>(options.learning_rate));
  return loss;
}

Status Train(const TrainOptions& options, const TrainTestSplit& data, Mlp* model) {
  const int rank = kolo::rank(), size = kolo::size();
  const int local_size = options.batch_size / size;
  const int steps_per_epoch = data.train.size() / options.batch_size;
  if (steps_per_epoch == 0) {
    return InvalidArgument("--batch-size " + std::to_string(options.batch_size) +
                           " is larger than the training set (" +
                           std::to_string(data.train.size()) + " samples)");
  }
  std::vector<NamedTensor> gradients;  // declared first: the averager points into it
  std::unique_ptr<GradientAverager> averager;
  int step = 0;
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    // The same order on every rank; each rank takes its slice of each global batch.
    std::vector<int> order = ShuffledIndices(data.train.size(), options.seed * 1000003 + epoch);
    double epoch_loss = 0.0;
    for (int s = 0; s < steps_per_epoch; ++s) {
      const int* local_batch = &order[s * options.batch_size + rank * local_size];
      StatusOr<float> loss =
          TrainStep(options, data.train, local_batch, local_size, &averager, model, &gradients);
      if (!loss.ok()) return loss.status().WithContext("step " + std::to_string(step + 1));
      epoch_loss += loss.value();
      ++step;
      if (rank == 0 && options.log_every > 0 && step % options.log_every == 0) {
        std::printf("step %d (epoch %d): loss=%.4f\n", step, epoch, loss.value());
      }
    }
    if (rank == 0) {
      std::printf("epoch %d/%d: mean_loss=%.4f test_accuracy=%.4f\n", epoch, options.epochs,
                  epoch_loss / steps_per_epoch, model->Accuracy(data.test));
    }
  }
  return Status::Ok();
}

// Everything between init() and shutdown(); returns the exit code.
int RunInitialized(const TrainOptions& options, const TrainTestSplit& data) {
  const int size = kolo::size();
  if (options.batch_size % size != 0) {
    std::fprintf(stderr, "kolo-train-digits: --batch-size %d is not divisible by the %d ranks\n",
                 options.batch_size, size);
    return 2;
  }
  if (kolo::rank() == 0) {
    std::printf("training on %d samples, testing on %d; %d ranks x %d samples per step\n",
                data.train.size(), data.test.size(), size, options.batch_size / size);
  }
  Mlp model(options.hidden, options.seed);
  Status status = Train(options, data, &model);
  if (!status.ok()) {
    std::fprintf(stderr, "kolo-train-digits: rank %d: %s\n", kolo::rank(),
                 status.ToString().c_str());
    return 1;
  }
  std::printf("final: accuracy=%.4f weights_checksum=0x%016" PRIx64 "\n", model.Accuracy(data.test),
              model.WeightsChecksum());
  return 0;
}

int Main(const std::vector<std::string>& args) {
  StatusOr<TrainOptions> options = ParseTrainOptions(args, KOLO_DIGITS_CSV);
  if (!options.ok()) {
    std::fprintf(stderr, "kolo-train-digits: %s\nRun 'kolo-train-digits --help' for usage.\n",
                 options.status().message().c_str());
    return 2;
  }
  if (options->show_help) {
    std::fputs(TrainUsage().c_str(), stdout);
    return 0;
  }
  StatusOr<Dataset> all = LoadDigitsCsv(options->data_path);
  if (!all.ok()) {
    std::fprintf(stderr, "kolo-train-digits: %s\n", all.status().message().c_str());
    return 1;
  }
  if (options->test_size >= all->size()) {
    std::fprintf(stderr, "kolo-train-digits: --test-size %d leaves no training data\n",
                 options->test_size);
    return 2;
  }
  TrainTestSplit data = SplitTrainTest(all.value(), options->test_size, options->seed);
  Status status = kolo::init();
  if (!status.ok()) {
    std::fprintf(stderr, "kolo-train-digits: kolo::init() failed: %s\n", status.ToString().c_str());
    return 1;
  }
  int code = RunInitialized(options.value(), data);
  // Also after a failure: shutdown() fails whatever is still pending, so no kolo op can touch
  // the buffers that are freed on return.
  status = kolo::shutdown();
  if (!status.ok()) {
    std::fprintf(stderr, "kolo-train-digits: kolo::shutdown() failed: %s\n",
                 status.ToString().c_str());
    if (code == 0) code = 1;
  }
  return code;
}

}  // namespace
}  // namespace kolo::examples

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines reach kolorun as they are printed
  return kolo::examples::Main(std::vector<std::string>(argv + 1, argv + argc));
}
