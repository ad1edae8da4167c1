// GradientSync: local accumulation, fp16 compression and overlapped allreduce of named
// gradients over kolo's public API; see kolo/gradient_sync.h.
#include "kolo/gradient_sync.h"

#include <cstdint>
#include <cstring>

#include "core/mutex.h"
#include "ops/half.h"
#include "ops/reduce_kernels.h"

namespace kolo {
namespace {

std::string JoinQuoted(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return out;
}

Status ValidateOptions(const GradientSyncOptions& options) {
  if (options.op != ReduceOp::kAverage && options.op != ReduceOp::kSum) {
    return InvalidArgument("GradientSync: op must be average or sum, not " +
                           ReduceOpName(options.op));
  }
  if (options.backward_passes_per_step < 1) {
    return InvalidArgument("GradientSync: backward_passes_per_step must be >= 1, not " +
                           std::to_string(options.backward_passes_per_step));
  }
  if (options.timeout.count() <= 0) {
    return InvalidArgument("GradientSync: timeout must be positive");
  }
  return Status::Ok();
}

}  // namespace

struct GradientSync::Gradient {
  std::string name;       // as registered
  std::string op_name;    // options.name_prefix + name
  TensorView user;        // the caller's buffer
  bool compress = false;  // float32 travelling as float16 in `wire`
  bool in_place = false;  // reduced in the caller's buffer itself (k = 1, no compression)
  // Per-step state.
  bool ready = false;        // marked Ready in the current pass
  bool accumulated = false;  // `accumulator` holds this step's partial sum
  bool started = false;      // allreduce started in this step
  // kolo-owned; shared with an in-flight callback, which keeps them alive.
  std::shared_ptr<std::vector<unsigned char>> accumulator;  // user dtype (k > 1 or no wire)
  std::shared_ptr<std::vector<uint16_t>> wire;              // float16 (compress)
};

struct GradientSync::Completions {
  Mutex mu;
  CondVar cv;  // with mu: an entry of `done` was set
  // Indexed like gradients_; entries for an allreduce started in this step.
  std::vector<char> done KOLO_GUARDED_BY(mu);
  std::vector<Status> results KOLO_GUARDED_BY(mu);
};

GradientSync::GradientSync(Runtime* runtime, const GradientSyncOptions& options)
    : runtime_(runtime), options_(options), completions_(std::make_shared<Completions>()) {}

GradientSync::~GradientSync() = default;

StatusOr<std::unique_ptr<GradientSync>> GradientSync::Create(Runtime& runtime,
                                                             const GradientSyncOptions& options) {
  KOLO_RETURN_IF_ERROR(ValidateOptions(options));
  return std::unique_ptr<GradientSync>(new GradientSync(&runtime, options));
}

StatusOr<std::unique_ptr<GradientSync>> GradientSync::Create(const GradientSyncOptions& options) {
  KOLO_RETURN_IF_ERROR(ValidateOptions(options));
  return std::unique_ptr<GradientSync>(new GradientSync(nullptr, options));
}

std::string GradientSync::Describe(const Gradient& gradient) const {
  return "gradient '" + gradient.name + "'";
}

Status GradientSync::Register(const std::string& name, const TensorView& gradient) {
  if (!broken_.ok()) return broken_;
  const std::string what = "GradientSync::Register '" + name + "'";
  if (name.empty()) return InvalidArgument("GradientSync::Register: empty name");
  if (index_.count(name)) return InvalidArgument(what + ": already registered");
  if (passes_in_step_ > 0) return FailedPrecondition(what + ": a step is in progress");
  for (const auto& g : gradients_) {
    if (g->ready) return FailedPrecondition(what + ": a step is in progress");
  }
  if (!gradient.device.is_cpu()) {
    return InvalidArgument(what + ": only host memory is supported, not " +
                           DeviceName(gradient.device));
  }
  if (!IsValidDataType(static_cast<int32_t>(gradient.dtype))) {
    return InvalidArgument(what + ": invalid dtype " + DataTypeName(gradient.dtype));
  }
  for (int64_t dim : gradient.shape) {
    if (dim < 0)
      return InvalidArgument(what + ": negative dimension in shape " +
                             ShapeToString(gradient.shape));
  }
  if (gradient.data == nullptr && gradient.num_elements() > 0) {
    return InvalidArgument(what + ": null data");
  }
  const int k = options_.backward_passes_per_step;
  if (k > 1 && options_.average_aggregated_gradients && !IsFloatingPoint(gradient.dtype)) {
    return InvalidArgument(what + ": averaging over " + std::to_string(k) +
                           " backward passes (average_aggregated_gradients) needs a "
                           "floating-point dtype, not " +
                           DataTypeName(gradient.dtype));
  }
  if (options_.op == ReduceOp::kAverage && gradient.dtype == DataType::kBool) {
    return InvalidArgument(what + ": bool gradients have no average; use op = kSum");
  }
  auto g = std::make_unique<Gradient>();
  g->name = name;
  g->op_name = options_.name_prefix + name;
  g->user = gradient;
  g->compress = options_.fp16_compression && gradient.dtype == DataType::kFloat32;
  g->in_place = k == 1 && !g->compress;
  const auto n = static_cast<size_t>(gradient.num_elements());
  if (k > 1) g->accumulator = std::make_shared<std::vector<unsigned char>>(gradient.num_bytes());
  if (g->compress) g->wire = std::make_shared<std::vector<uint16_t>>(n);
  {
    MutexLock lock(&completions_->mu);
    completions_->done.push_back(0);
    completions_->results.emplace_back();
  }
  index_.emplace(name, gradients_.size());
  gradients_.push_back(std::move(g));
  return Status::Ok();
}

Status GradientSync::Ready(const std::string& name) {
  if (!broken_.ok()) return broken_;
  auto it = index_.find(name);
  if (it == index_.end()) {
    return InvalidArgument("GradientSync::Ready: unknown gradient '" + name + "'");
  }
  Gradient& g = *gradients_[it->second];
  if (g.ready) {
    return FailedPrecondition("GradientSync::Ready: " + Describe(g) +
                              " was already marked ready in this backward pass");
  }
  g.ready = true;
  const int k = options_.backward_passes_per_step;
  const int64_t n = g.user.num_elements();
  const void* source = g.user.data;  // what this rank contributes
  if (k > 1) {
    if (g.accumulated) {
      ops::Reduce(g.accumulator->data(), g.user.data, static_cast<size_t>(n), g.user.dtype,
                  ReduceOp::kSum);
    } else if (n > 0) {
      std::memcpy(g.accumulator->data(), g.user.data, g.user.num_bytes());
    }
    g.accumulated = true;
    if (passes_in_step_ + 1 < k) return Status::Ok();  // not a communicating pass
    // Horovod TensorFlow's average_aggregated_gradients: the passes are averaged too (before
    // the allreduce here, after it there: the same in real arithmetic).
    if (options_.average_aggregated_gradients) {
      ops::ScaleCopy(g.accumulator->data(), g.accumulator->data(), static_cast<size_t>(n),
                     g.user.dtype, 1.0 / k);
    }
    source = g.accumulator->data();
  }
  if (g.compress) {
    const float* values = static_cast<const float*>(source);
    uint16_t* wire = g.wire->data();
    ops::FloatToHalf(values, wire, static_cast<size_t>(n));
  }
  return StartAllreduce(it->second);
}

Status GradientSync::StartAllreduce(size_t index) {
  Gradient& g = *gradients_[index];
  TensorView view = g.user;
  std::shared_ptr<void> keep_alive;  // the kolo-owned buffer kolo reads and writes
  if (g.compress) {
    view.data = g.wire->data();
    view.dtype = DataType::kFloat16;
    keep_alive = g.wire;
  } else if (!g.in_place) {
    view.data = g.accumulator->data();
    keep_alive = g.accumulator;
  }
  AllreduceOptions options;
  options.op = options_.op;
  std::shared_ptr<Completions> completions = completions_;
  Callback done = [completions, index, keep_alive](const Status& status) {
    MutexLock lock(&completions->mu);
    completions->done[index] = 1;
    completions->results[index] = status;
    completions->cv.NotifyAll();
  };
  g.started = true;
  Status status = runtime_ != nullptr
                      ? runtime_->AllreduceAsync(g.op_name, view, view, options, std::move(done))
                      : allreduce_async(g.op_name, view, view, options, std::move(done));
  if (!status.ok()) {
    // No callback will run; record the failure so that Synchronize reports it too.
    status =
        status.WithContext("GradientSync: allreduce of " + Describe(g) + " ('" + g.op_name + "')");
    MutexLock lock(&completions_->mu);
    completions_->done[index] = 1;
    completions_->results[index] = status;
  }
  return status;
}

StatusOr<bool> GradientSync::Synchronize() {
  if (!broken_.ok()) return broken_;
  if (passes_in_step_ + 1 < options_.backward_passes_per_step) {
    ++passes_in_step_;
    for (auto& g : gradients_) g->ready = false;
    return false;
  }
  Completions& c = *completions_;
  {
    MutexLock lock(&c.mu);
    auto all_done = [&]() KOLO_REQUIRES(c.mu) {
      for (size_t i = 0; i < gradients_.size(); ++i) {
        if (gradients_[i]->started && !c.done[i]) return false;
      }
      return true;
    };
    if (!c.cv.WaitFor(&c.mu, options_.timeout, all_done)) {
      std::vector<std::string> pending;
      for (size_t i = 0; i < gradients_.size(); ++i) {
        if (gradients_[i]->started && !c.done[i]) pending.push_back(gradients_[i]->name);
      }
      broken_ = DeadlineExceeded("GradientSync::Synchronize: allreduce of gradient(s) " +
                                 JoinQuoted(pending) + " still pending after " +
                                 std::to_string(options_.timeout.count()) + " ms");
      return broken_;
    }
  }
  std::vector<std::string> missing;
  Status first_error;
  for (size_t i = 0; i < gradients_.size(); ++i) {
    const Gradient& g = *gradients_[i];
    if (!g.ready) missing.push_back(g.name);
    MutexLock lock(&c.mu);
    if (g.started && !c.results[i].ok() && first_error.ok()) {
      first_error = c.results[i];
      if (first_error.message().find("GradientSync:") != 0) {
        first_error = first_error.WithContext("GradientSync: allreduce of " + Describe(g) + " ('" +
                                              g.op_name + "')");
      }
    }
  }
  if (!missing.empty()) {
    ResetStep();
    return FailedPrecondition("GradientSync::Synchronize: gradient(s) " + JoinQuoted(missing) +
                              " not marked ready on the communicating backward pass; step dropped");
  }
  if (!first_error.ok()) {
    ResetStep();
    return first_error;
  }
  WriteBack();
  ResetStep();
  return true;
}

void GradientSync::WriteBack() {
  for (auto& gradient : gradients_) {
    Gradient& g = *gradient;
    const int64_t n = g.user.num_elements();
    if (g.in_place || n == 0) continue;
    if (g.compress) {
      float* out = static_cast<float*>(g.user.data);
      const uint16_t* wire = g.wire->data();
      ops::HalfToFloat(wire, out, static_cast<size_t>(n));
    } else {
      std::memcpy(g.user.data, g.accumulator->data(), g.user.num_bytes());
    }
  }
}

void GradientSync::ResetStep() {
  passes_in_step_ = 0;
  MutexLock lock(&completions_->mu);
  for (size_t i = 0; i < gradients_.size(); ++i) {
    Gradient& g = *gradients_[i];
    g.ready = g.accumulated = g.started = false;
    completions_->done[i] = 0;
    completions_->results[i] = Status::Ok();
  }
}

bool GradientSync::IsReduced(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end() || !gradients_[it->second]->started) return false;
  MutexLock lock(&completions_->mu);
  return completions_->done[it->second] != 0;
}

Status GradientSync::WaitReduced(const std::string& name, std::chrono::milliseconds timeout) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return InvalidArgument("GradientSync::WaitReduced: unknown gradient '" + name + "'");
  }
  const size_t index = it->second;
  if (!gradients_[index]->started) {
    return FailedPrecondition("GradientSync::WaitReduced: the allreduce of " +
                              Describe(*gradients_[index]) + " was not started in this step");
  }
  MutexLock lock(&completions_->mu);
  if (!completions_->cv.WaitFor(&completions_->mu, timeout, [&]() KOLO_REQUIRES(completions_->mu) {
        return completions_->done[index] != 0;
      })) {
    return DeadlineExceeded("GradientSync::WaitReduced: allreduce of " +
                            Describe(*gradients_[index]) + " still pending after " +
                            std::to_string(timeout.count()) + " ms");
  }
  return completions_->results[index];
}

}  // namespace kolo
