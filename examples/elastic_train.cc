// kolo-elastic-train: an elastic training loop on kolo's C++ API (docs/ELASTIC.md):
// kolo::elastic::Run and State, as kolo.torch.elastic's hvd.elastic.run and TorchState for
// Python. The state commits every few steps; when an op fails because a rank was lost, Run
// restores the last commit, shuts down and initialises again (kolorun's elastic driver
// renumbers the survivors into the next generation), syncs the state from the new rank 0 and
// trains on; when a commit says hosts were added, every rank leaves together and Run re-forms
// keeping the state.
//
//   kolorun -np 4 --min-np 2 --max-np 4 --host-discovery-script ./hosts.sh
//           build/bin/kolo-elastic-train --steps 200
//
// The model is a vector of 8 weights that every step moves by the average of every rank's
// gradient (1.0 everywhere), so the final weights are the same whatever ranks came and went:
// -0.01 times the steps, exactly as a one-rank run computes them. Each rank prints a line per
// generation ("generation G rank R of S pid P"), one per commit ("commit step N size S") and
// at the end "done steps N weights W checksum C".
#include <kolo/elastic.h>
#include <kolo/kolo.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Flags {
  int64_t steps = 100;
  int commit_every = 5;
  int step_ms = 20;  // simulated compute per step, so that a test can act mid-run
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--steps") {
      flags->steps = value;
    } else if (flag == "--commit-every") {
      flags->commit_every = static_cast<int>(value);
    } else if (flag == "--step-ms") {
      flags->step_ms = static_cast<int>(value);
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && flags->steps > 0 && flags->commit_every > 0 && flags->step_ms >= 0;
}

kolo::TensorView View(std::vector<float>* values) {
  return {values->data(),
          kolo::DataType::kFloat32,
          {static_cast<int64_t>(values->size())},
          kolo::Device::Cpu()};
}

// The model: a step counter and 8 weights; a committed copy to go back to.
class TrainState : public kolo::elastic::State {
 public:
  int64_t step = 0;
  std::vector<float> weights = std::vector<float>(8, 0.0f);

  void Save() override {
    saved_step_ = step;
    saved_weights_ = weights;
  }
  void Restore() override {
    std::fprintf(stderr, "rank %d: restoring step %lld\n", kolo::rank(),
                 static_cast<long long>(saved_step_));
    step = saved_step_;
    weights = saved_weights_;
  }
  // Rank 0's state to every rank (a new rank has none; the others agree already).
  kolo::Status Sync() override {
    std::vector<float> packed = weights;
    packed.push_back(static_cast<float>(step));  // exact below 2^24 steps
    KOLO_RETURN_IF_ERROR(kolo::broadcast("elastic/state", View(&packed), 0));
    step = static_cast<int64_t>(packed.back());
    packed.pop_back();
    weights = packed;
    return kolo::Status::Ok();
  }

 private:
  int64_t saved_step_ = 0;
  std::vector<float> saved_weights_ = std::vector<float>(8, 0.0f);
};

double Checksum(const std::vector<float>& weights) {
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) sum += static_cast<double>(i + 1) * weights[i];
  return sum;
}

// Trains until flags.steps; returns early (any status) when a commit says hosts were added.
kolo::Status Train(const Flags& flags, TrainState* state) {
  std::printf("generation %lld rank %d of %d pid %d\n",
              static_cast<long long>(kolo::elastic::generation()), kolo::rank(), kolo::size(),
              static_cast<int>(getpid()));
  std::fflush(stdout);
  while (state->step < flags.steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(flags.step_ms));
    std::vector<float> gradient(state->weights.size(), 1.0f);
    kolo::AllreduceOptions average;
    average.op = kolo::ReduceOp::kAverage;
    KOLO_RETURN_IF_ERROR(kolo::allreduce("grad", View(&gradient), View(&gradient), average));
    for (size_t i = 0; i < state->weights.size(); ++i) state->weights[i] -= 0.01f * gradient[i];
    ++state->step;
    if (state->step % flags.commit_every != 0) continue;
    std::printf("commit step %lld size %d\n", static_cast<long long>(state->step), kolo::size());
    std::fflush(stdout);
    KOLO_ASSIGN_OR_RETURN(bool hosts_added, state->Commit());
    if (hosts_added) return kolo::Status::Ok();
  }
  std::printf("done steps %lld weights %.6f checksum %.6f\n", static_cast<long long>(state->step),
              static_cast<double>(state->weights[0]), Checksum(state->weights));
  std::fflush(stdout);
  return kolo::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr, "usage: %s [--steps N] [--commit-every K] [--step-ms MS]\n", argv[0]);
    return 2;
  }
  TrainState state;
  const kolo::Status trained =
      kolo::elastic::Run(&state, [&flags, &state] { return Train(flags, &state); });
  if (!trained.ok()) {
    std::fprintf(stderr, "training failed: %s\n", trained.ToString().c_str());
    return 1;
  }
  return 0;
}
