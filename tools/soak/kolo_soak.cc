// kolo-soak: the reliability soak (docs/RELIABILITY-SOAK.md). Trains a synthetic model of 100
// tensors (mixed sizes and dtypes; soak_model.h) for thousands of steps: each step allreduces every
// tensor asynchronously, then allgathers a tensor whose first dimension differs per rank and
// broadcasts one from a rotating root, and checks every element of every result. Rank 0 prints
// its RSS every --report-every steps; every rank prints its RSS after --warmup steps and at
// the end, and fails if it grew by more than --max-rss-growth-mb (0: report only).
// Run it under kolorun, usually from a sanitizer build (tools/soak.sh):
//   kolorun -np 4 kolo-soak --steps 3000
// Exits 0 when every result was right and memory stayed within bounds, 1 otherwise.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "kolo/kolo.h"
#include "tools/soak/soak_model.h"

namespace {

using kolo::Status;
using kolo::soak::SoakTensor;

struct SoakFlags {
  int64_t steps = 2000;
  int tensors = 100;
  int64_t report_every = 0;  // 0: steps / 10
  int64_t warmup = 0;        // 0: steps / 10
  int64_t max_rss_growth_mb = 0;
  double step_timeout_seconds = 300;
};

bool ParseFlags(int argc, char** argv, SoakFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kolo-soak: %s needs a value\n", flag.c_str());
      return false;
    }
    char* end = nullptr;
    const char* text = argv[++i];
    const double value = std::strtod(text, &end);
    if (end == text || *end != '\0' || value < 0) {
      std::fprintf(stderr, "kolo-soak: %s %s: not a non-negative number\n", flag.c_str(), text);
      return false;
    }
    if (flag == "--steps") {
      flags->steps = static_cast<int64_t>(value);
    } else if (flag == "--tensors") {
      flags->tensors = static_cast<int>(value);
    } else if (flag == "--report-every") {
      flags->report_every = static_cast<int64_t>(value);
    } else if (flag == "--warmup") {
      flags->warmup = static_cast<int64_t>(value);
    } else if (flag == "--max-rss-growth-mb") {
      flags->max_rss_growth_mb = static_cast<int64_t>(value);
    } else if (flag == "--step-timeout-seconds") {
      flags->step_timeout_seconds = value;
    } else {
      std::fprintf(stderr,
                   "kolo-soak: unknown flag %s (flags: --steps, --tensors, --report-every, "
                   "--warmup, --max-rss-growth-mb, --step-timeout-seconds)\n",
                   flag.c_str());
      return false;
    }
  }
  if (flags->steps < 1 || flags->tensors < 1) {
    std::fprintf(stderr, "kolo-soak: --steps and --tensors must be at least 1\n");
    return false;
  }
  if (flags->report_every == 0) flags->report_every = std::max<int64_t>(1, flags->steps / 10);
  if (flags->warmup == 0) flags->warmup = std::min<int64_t>(flags->steps, flags->steps / 10 + 1);
  return true;
}

// Counts the callbacks of one step's async allreduces; keeps the first failure.
class StepLatch {
 public:
  explicit StepLatch(int pending) : pending_(pending) {}
  void Done(const Status& status) {
    kolo::MutexLock lock(&mutex_);
    if (!status.ok() && first_error_.ok()) first_error_ = status;
    if (--pending_ == 0) done_.NotifyAll();
  }
  // Waits at most `seconds` for every callback.
  Status Wait(double seconds) {
    kolo::MutexLock lock(&mutex_);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(seconds));
    if (!done_.WaitUntil(&mutex_, deadline,
                         [this]() KOLO_REQUIRES(mutex_) { return pending_ == 0; })) {
      return kolo::DeadlineExceeded(std::to_string(pending_) +
                                    " allreduces did not complete within " +
                                    std::to_string(seconds) + " s (--step-timeout-seconds)");
    }
    return first_error_;
  }

 private:
  kolo::Mutex mutex_;
  kolo::CondVar done_;  // with mutex_: pending_ reached 0
  int pending_ KOLO_GUARDED_BY(mutex_);
  Status first_error_ KOLO_GUARDED_BY(mutex_);
};

class Soak {
 public:
  explicit Soak(const SoakFlags& flags)
      : flags_(flags), model_(kolo::soak::SoakModel(flags.tensors)), buffers_(model_.size()) {
    for (size_t t = 0; t < model_.size(); ++t) {
      buffers_[t].resize(model_[t].count * kolo::DataTypeSize(model_[t].dtype));
    }
  }

  // One training step; returns false (having printed why) on a failure or a wrong result.
  bool Step(int64_t step);
  int64_t wrong() const { return wrong_; }

 private:
  bool Allreduces(int64_t step);
  bool Allgather(int64_t step);
  bool Broadcast(int64_t step);
  bool Failed(int64_t step, const std::string& what, const Status& status) const;

  const SoakFlags flags_;
  const std::vector<SoakTensor> model_;
  std::vector<std::vector<char>> buffers_;
  std::vector<float> gathered_;
  std::vector<float> broadcast_ = std::vector<float>(4099);
  int64_t wrong_ = 0;
  std::string first_error_;
};

bool Soak::Failed(int64_t step, const std::string& what, const Status& status) const {
  std::fprintf(stderr, "kolo-soak: rank %d step %lld: %s: %s\n", kolo::rank(),
               static_cast<long long>(step), what.c_str(), status.ToString().c_str());
  return false;
}

bool Soak::Allreduces(int64_t step) {
  const int rank = kolo::rank();
  StepLatch latch(static_cast<int>(model_.size()));
  for (size_t t = 0; t < model_.size(); ++t) {
    const SoakTensor& tensor = model_[t];
    kolo::soak::FillSoakInput(tensor, t, rank, step, buffers_[t].data());
    kolo::TensorView view{
        buffers_[t].data(), tensor.dtype, {static_cast<int64_t>(tensor.count)}, {}};
    kolo::AllreduceOptions options;
    options.op = tensor.op;
    Status status = kolo::allreduce_async(tensor.name, view, view, options,
                                          [&latch](const Status& s) { latch.Done(s); });
    if (!status.ok()) {
      // The callbacks of those already queued still run and reference `latch`: wait for them.
      for (size_t rest = t; rest < model_.size(); ++rest) latch.Done(Status::Ok());
      (void)latch.Wait(flags_.step_timeout_seconds);
      return Failed(step, "allreduce '" + tensor.name + "'", status);
    }
  }
  Status status = latch.Wait(flags_.step_timeout_seconds);
  if (!status.ok()) return Failed(step, "allreduces", status);
  for (size_t t = 0; t < model_.size(); ++t) {
    wrong_ += kolo::soak::CheckSoakResult(model_[t], t, kolo::size(), step, buffers_[t].data(),
                                          &first_error_);
  }
  return true;
}

// Rank r contributes r + 1 rows of 8 floats: row i of rank r holds r * 1000 + i * 8 + col.
bool Soak::Allgather(int64_t step) {
  const int rank = kolo::rank();
  const int size = kolo::size();
  std::vector<float> input(static_cast<size_t>(rank + 1) * 8);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(rank * 1000 + i);
  kolo::TensorView view{input.data(), kolo::DataType::kFloat32, {rank + 1, 8}, {}};
  Status status = kolo::allgather("soak/gather", view, [this](const std::vector<int64_t>& shape) {
    gathered_.resize(static_cast<size_t>(shape[0] * shape[1]));
    return static_cast<void*>(gathered_.data());
  });
  if (!status.ok()) return Failed(step, "allgather 'soak/gather'", status);
  size_t at = 0;
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < static_cast<size_t>(r + 1) * 8; ++i, ++at) {
      if (at < gathered_.size() && gathered_[at] == static_cast<float>(r * 1000 + i)) continue;
      if (wrong_++ == 0 && first_error_.empty()) {
        first_error_ = "step " + std::to_string(step) + ": allgather element " +
                       std::to_string(at) + " (rank " + std::to_string(r) + ") is wrong";
      }
    }
  }
  return true;
}

// Root step % size sends root * 7 + j % 100 + step % 5; the others start from -1.
bool Soak::Broadcast(int64_t step) {
  const int root = static_cast<int>(step % kolo::size());
  for (size_t j = 0; j < broadcast_.size(); ++j) {
    broadcast_[j] = kolo::rank() == root ? static_cast<float>(root * 7 + j % 100 + step % 5) : -1;
  }
  kolo::TensorView view{
      broadcast_.data(), kolo::DataType::kFloat32, {static_cast<int64_t>(broadcast_.size())}, {}};
  Status status = kolo::broadcast("soak/broadcast", view, root);
  if (!status.ok()) return Failed(step, "broadcast 'soak/broadcast'", status);
  for (size_t j = 0; j < broadcast_.size(); ++j) {
    if (broadcast_[j] == static_cast<float>(root * 7 + j % 100 + step % 5)) continue;
    if (wrong_++ == 0 && first_error_.empty()) {
      first_error_ = "step " + std::to_string(step) + ": broadcast element " + std::to_string(j) +
                     " from root " + std::to_string(root) + " is wrong";
    }
  }
  return true;
}

bool Soak::Step(int64_t step) {
  if (!Allreduces(step) || !Allgather(step) || !Broadcast(step)) return false;
  if (wrong_ > 0) {
    std::fprintf(stderr, "kolo-soak: rank %d: %lld wrong elements; first: %s\n", kolo::rank(),
                 static_cast<long long>(wrong_), first_error_.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  SoakFlags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  Status status = kolo::init();
  if (!status.ok()) {
    std::fprintf(stderr, "kolo-soak: init: %s\n", status.ToString().c_str());
    return 1;
  }
  const int rank = kolo::rank();
  Soak soak(flags);
  const int64_t rss_start = kolo::soak::ResidentKiB();
  int64_t rss_warm = rss_start;
  const auto start = std::chrono::steady_clock::now();
  if (rank == 0) {
    std::printf("kolo-soak: %d ranks, %d tensors, %lld steps; rss %lld KiB at start\n",
                kolo::size(), flags.tensors, static_cast<long long>(flags.steps),
                static_cast<long long>(rss_start));
    std::fflush(stdout);
  }
  bool ok = true;
  for (int64_t step = 1; ok && step <= flags.steps; ++step) {
    ok = soak.Step(step);
    if (step == flags.warmup) rss_warm = kolo::soak::ResidentKiB();
    if (rank == 0 && (step % flags.report_every == 0 || step == flags.steps)) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("kolo-soak: step %lld: rss %lld KiB, %.1f steps/s\n",
                  static_cast<long long>(step), static_cast<long long>(kolo::soak::ResidentKiB()),
                  step / s);
      std::fflush(stdout);
    }
  }
  const int64_t rss_end = kolo::soak::ResidentKiB();
  const int64_t growth_kib = rss_end - rss_warm;
  std::printf(
      "kolo-soak: rank %d %s: rss start %lld KiB, after %lld warmup steps %lld KiB, end %lld "
      "KiB (%+lld KiB since warmup)\n",
      rank, ok ? "done" : "FAILED", static_cast<long long>(rss_start),
      static_cast<long long>(flags.warmup), static_cast<long long>(rss_warm),
      static_cast<long long>(rss_end), static_cast<long long>(growth_kib));
  if (ok && flags.max_rss_growth_mb > 0 && growth_kib > flags.max_rss_growth_mb * 1024) {
    std::fprintf(stderr,
                 "kolo-soak: rank %d: rss grew %lld KiB after warmup, over %lld MiB "
                 "(--max-rss-growth-mb)\n",
                 rank, static_cast<long long>(growth_kib),
                 static_cast<long long>(flags.max_rss_growth_mb));
    ok = false;
  }
  std::fflush(stdout);
  status = kolo::shutdown();
  if (!status.ok()) {
    std::fprintf(stderr, "kolo-soak: rank %d: shutdown: %s\n", rank, status.ToString().c_str());
    ok = false;
  }
  return ok ? 0 : 1;
}
