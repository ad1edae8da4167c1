// kolo-elastic-train: an elastic training loop on kolo's C++ API (docs/ELASTIC.md), the pattern
// kolo.torch.elastic runs for Python: commit the state every few steps; when an op fails
// because a rank was lost, restore the last commit, shutdown() and init() again (kolorun's
// elastic driver renumbers the survivors into the next generation), take the state from the new
// rank 0 and go on; at a commit, rank 0 asks the driver whether hosts were added, and every rank
// leaves for the next generation together, keeping its state.
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

struct TrainState {
  int64_t step = 0;
  std::vector<float> weights = std::vector<float>(8, 0.0f);
};

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

// Rank 0's state to every rank (Horovod's state.sync()).
kolo::Status Sync(TrainState* state) {
  std::vector<float> packed = state->weights;
  packed.push_back(static_cast<float>(state->step));  // exact below 2^24 steps
  KOLO_RETURN_IF_ERROR(kolo::broadcast("elastic/state", View(&packed), 0));
  state->step = static_cast<int64_t>(packed.back());
  packed.pop_back();
  state->weights = packed;
  return kolo::Status::Ok();
}

// Whether hosts were added since `*seen` (Horovod's check_host_updates): rank 0 asks kolorun's
// driver and broadcasts the answer, so that every rank leaves at the same commit.
kolo::StatusOr<bool> HostsAdded(int64_t* seen) {
  std::vector<float> answer(1, 0.0f);
  if (kolo::rank() == 0) {
    kolo::StatusOr<kolo::elastic::HostUpdates> updates = kolo::elastic::poll_host_updates(*seen);
    if (!updates.ok()) return updates.status();
    *seen = updates->timestamp;
    answer[0] = (updates->kinds & kolo::elastic::kHostsAdded) != 0 ? 1.0f : 0.0f;
  }
  KOLO_RETURN_IF_ERROR(kolo::broadcast("elastic/hosts", View(&answer), 0));
  return answer[0] != 0.0f;
}

double Checksum(const std::vector<float>& weights) {
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) sum += static_cast<double>(i + 1) * weights[i];
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr, "usage: %s [--steps N] [--commit-every K] [--step-ms MS]\n", argv[0]);
    return 2;
  }
  TrainState committed;
  TrainState live;
  int64_t hosts_seen = 0;
  for (;;) {
    kolo::Status s = kolo::init();
    if (!s.ok()) {
      std::fprintf(stderr, "init failed: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("generation %lld rank %d of %d pid %d\n",
                static_cast<long long>(kolo::elastic::generation()), kolo::rank(), kolo::size(),
                static_cast<int>(getpid()));
    std::fflush(stdout);
    bool keep_state = false;  // true: left for added hosts; false: an op failed
    s = Sync(&live);
    while (s.ok() && live.step < flags.steps) {
      std::this_thread::sleep_for(std::chrono::milliseconds(flags.step_ms));
      std::vector<float> gradient(live.weights.size(), 1.0f);
      kolo::AllreduceOptions average;
      average.op = kolo::ReduceOp::kAverage;
      s = kolo::allreduce("grad", View(&gradient), View(&gradient), average);
      if (!s.ok()) break;
      for (size_t i = 0; i < live.weights.size(); ++i) live.weights[i] -= 0.01f * gradient[i];
      ++live.step;
      if (live.step % flags.commit_every != 0) continue;
      committed = live;
      std::printf("commit step %lld size %d\n", static_cast<long long>(live.step), kolo::size());
      std::fflush(stdout);
      kolo::StatusOr<bool> added = HostsAdded(&hosts_seen);
      if (!added.ok()) {
        s = added.status();
      } else if (*added) {
        keep_state = true;
        break;
      }
    }
    if (s.ok() && !keep_state) {
      std::printf("done steps %lld weights %.6f checksum %.6f\n", static_cast<long long>(live.step),
                  static_cast<double>(live.weights[0]), Checksum(live.weights));
      std::fflush(stdout);
      return kolo::shutdown().ok() ? 0 : 1;
    }
    if (!keep_state) {
      std::fprintf(stderr, "rank %d: %s; restoring step %lld\n", kolo::rank(), s.ToString().c_str(),
                   static_cast<long long>(committed.step));
      live = committed;
    }
    kolo::shutdown().IgnoreError();  // after a lost rank it reports that loss; known here
  }
}
