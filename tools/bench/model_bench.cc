#include "tools/bench/model_bench.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/mutex.h"
#include "kolo/kolo.h"
#include "runtime/raw_data_plane.h"
#include "tools/bench/bench_device.h"
#include "tools/bench/bench_stats.h"
#include "tools/bench/model_gradients.h"

namespace kolo::bench {
namespace {

using BenchClock = std::chrono::steady_clock;

// Counts callbacks down to zero; keeps the first failure.
class Countdown {
 public:
  explicit Countdown(int count) : remaining_(count) {}
  void Done(const Status& status) {
    MutexLock lock(&mu_);
    if (!status.ok() && first_error_.ok()) first_error_ = status;
    if (--remaining_ == 0) all_done_.NotifyAll();
  }
  Status Wait(std::chrono::seconds limit) {
    MutexLock lock(&mu_);
    if (!all_done_.WaitFor(&mu_, limit, [&]() KOLO_REQUIRES(mu_) { return remaining_ == 0; })) {
      return DeadlineExceeded(std::to_string(remaining_) + " gradients still pending after " +
                              std::to_string(limit.count()) + " s");
    }
    return first_error_;
  }

 private:
  Mutex mu_;
  CondVar all_done_;  // with mu_: remaining_ reached 0
  int remaining_ KOLO_GUARDED_BY(mu_);
  Status first_error_ KOLO_GUARDED_BY(mu_);
};

// Elements not equal to `want` (every rank contributes 1.0, so a sum is exact).
int64_t CountWrong(const float* data, size_t count, float want) {
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += data[i] != want;
  return wrong;
}

struct Timings {
  std::vector<double> step_us;
  std::vector<double> raw_us;
  int64_t wrong = 0;
};

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

// One step: every gradient its own named allreduce, enqueued last layer first, then a wait
// for all of them, as a data-parallel optimizer does. `grads` is memory of `device`.
Status RunStep(const std::vector<ModelTensor>& tensors, const std::vector<size_t>& offsets,
               float* grads, Device device, double* time_us) {
  Countdown pending(static_cast<int>(tensors.size()));
  const BenchClock::time_point start = BenchClock::now();
  for (size_t i = tensors.size(); i-- > 0;) {
    TensorView view{grads + offsets[i], DataType::kFloat32, {tensors[i].elements}, device};
    Status status = allreduce_async("grad/" + tensors[i].name, view, view, {},
                                    [&pending](const Status& s) { pending.Done(s); });
    if (!status.ok()) return status.WithContext("enqueueing grad/" + tensors[i].name);
  }
  KOLO_RETURN_IF_ERROR(pending.Wait(std::chrono::seconds(600)));
  *time_us = std::chrono::duration<double, std::micro>(BenchClock::now() - start).count();
  return Status::Ok();
}

// The slowest rank's time of each iteration, and the wrong elements of all ranks.
Status ReduceAcrossRanks(Timings* t) {
  for (std::vector<double>* times : {&t->step_us, &t->raw_us}) {
    if (times->empty()) continue;  // no raw line on a GPU
    TensorView view{
        times->data(), DataType::kFloat64, {static_cast<int64_t>(times->size())}, Device::Cpu()};
    AllreduceOptions max;
    max.op = ReduceOp::kMax;
    KOLO_RETURN_IF_ERROR(allreduce("bench/model/times", view, view, max));
  }
  TensorView wrong{&t->wrong, DataType::kInt64, {}, Device::Cpu()};
  return allreduce("bench/model/wrong", wrong, wrong);
}

// The iterations: on host memory each step is followed by one raw allreduce of the same
// bytes; on a GPU the gradients are uploaded before and downloaded after each step (untimed),
// and there is no raw line (the raw data plane runs on host memory only).
Status RunIterations(const BenchOptions& options, const std::vector<ModelTensor>& tensors,
                     const std::vector<size_t>& offsets, size_t total, Timings* t) {
  std::vector<float> host(total);
  float* grads = host.data();
  std::unique_ptr<BenchDevice> gpu;
  if (options.device != "cpu") {
    KOLO_ASSIGN_OR_RETURN(gpu, OpenBenchDevice(options.device, rank(), local_rank()));
    KOLO_ASSIGN_OR_RETURN(void* p, gpu->Alloc(total * sizeof(float)));
    grads = static_cast<float*>(p);
  }
  const Device device = gpu ? gpu->device() : Device::Cpu();
  const float want = static_cast<float>(size());
  for (int i = 0; i < options.warmup_iters + options.iters; ++i) {
    const bool timed = i >= options.warmup_iters;
    double step_us = 0;
    std::fill(host.begin(), host.end(), 1.0f);
    if (gpu) KOLO_RETURN_IF_ERROR(gpu->Upload(grads, host.data(), total * sizeof(float)));
    KOLO_RETURN_IF_ERROR(RunStep(tensors, offsets, grads, device, &step_us));
    if (gpu) KOLO_RETURN_IF_ERROR(gpu->Download(host.data(), grads, total * sizeof(float)));
    if (timed && options.check) t->wrong += CountWrong(host.data(), total, want);
    if (timed) t->step_us.push_back(step_us);
    if (gpu) continue;
    std::fill(host.begin(), host.end(), 1.0f);
    const BenchClock::time_point start = BenchClock::now();
    KOLO_RETURN_IF_ERROR(
        internal::RawAllreduce(host.data(), static_cast<int64_t>(total), DataType::kFloat32));
    const double raw_us =
        std::chrono::duration<double, std::micro>(BenchClock::now() - start).count();
    if (timed && options.check) t->wrong += CountWrong(host.data(), total, want);
    if (timed) t->raw_us.push_back(raw_us);
  }
  return Status::Ok();
}

}  // namespace

int RunModelBench(const BenchOptions& options) {
  StatusOr<std::vector<ModelTensor>> tensors = ModelGradients(options.model);
  if (!tensors.ok()) {
    std::fprintf(stderr, "kolo-bench: %s\n", tensors.status().message().c_str());
    return 2;
  }
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const ModelTensor& t : *tensors) {
    offsets.push_back(total);
    total += static_cast<size_t>(t.elements);
  }
  Timings t;
  Status status = RunIterations(options, *tensors, offsets, total, &t);
  if (status.ok()) status = ReduceAcrossRanks(&t);
  if (!status.ok()) {
    std::fprintf(stderr, "kolo-bench: rank %d: %s\n", rank(), status.ToString().c_str());
    return 1;
  }
  if (rank() == 0) {
    const double bytes = static_cast<double>(total) * sizeof(float);
    const int n = size();
    const double factor = n > 1 ? 2.0 * (n - 1) / n : 0.0;
    auto busbw = [&](double us) { return us > 0 ? bytes / us / 1e3 * factor : 0.0; };
    const double step = Median(t.step_us);
    std::printf(
        "# kolo-bench: %s gradients (%zu tensors, %zu float32, %.1f MiB) on %s, allreduce sum "
        "over %d ranks, %d iterations\n",
        options.model.c_str(), tensors->size(), total, bytes / (1 << 20), options.device.c_str(), n,
        options.iters);
    std::printf("# %-26s  %12s  %12s  %11s\n", "mode", "median (us)", "mean (us)", "busbw (GB/s)");
    std::printf("  %-26s  %12.0f  %12.0f  %11.2f\n", "step through the runtime", step,
                Mean(t.step_us), busbw(step));
    if (!t.raw_us.empty()) {
      const double raw = Median(t.raw_us);
      std::printf("  %-26s  %12.0f  %12.0f  %11.2f\n", "raw data plane, one buffer", raw,
                  Mean(t.raw_us), busbw(raw));
      std::printf("# step / raw (median)      : %.3f\n", raw > 0 ? step / raw : 0.0);
    }
    if (options.check) {
      std::printf("# Wrong elements           : %lld %s\n", static_cast<long long>(t.wrong),
                  t.wrong == 0 ? "OK" : "FAILED");
    }
    std::fflush(stdout);
  }
  return t.wrong == 0 ? 0 : 1;
}

}  // namespace kolo::bench
