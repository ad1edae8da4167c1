#include "ops/gpu_plane/gpu_plane.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "core/config/config_table.h"
#include "core/op_text.h"
#include "ops/gpu/gpu_executor.h"
#include "ops/gpu/staged_executor.h"
#include "ops/gpu_plane/comm_bootstrap.h"
#include "ops/gpu_plane/rank_bytes.h"
#include "ops/nccl/nccl_backend.h"
#include "ops/nccl/nccl_environment.h"

namespace kolo {
namespace {

// What a rank says about its GPU path at the first GPU response (allgathered, one byte).
enum PathByte : uint8_t { kNoGpu = 0, kNccl = 1, kRing = 2 };

const char* PathText(uint8_t path) {
  return path == kNccl ? "nccl" : path == kRing ? "ring" : "no usable GPU";
}

}  // namespace

StatusOr<std::unique_ptr<GpuPlane>> GpuPlane::Create(const Options& options, Wiring wiring,
                                                     Executor* host, DataPlane* mesh,
                                                     Logger logger) {
  GpuBackends backends = MakeGpuBackends(options);
  const GpuOperations asked = options.gpu_operations;
  const bool nccl = asked == GpuOperations::kNccl ||
                    (asked == GpuOperations::kAuto && backends.collectives != nullptr);
  if (asked != GpuOperations::kAuto) {
    // Set explicitly: the job means to use GPUs, so this is the moment to say it cannot.
    const std::string variable =
        std::string("KOLO_GPU_OPERATIONS=") + GpuOperationsName(asked) + ": ";
    if (backends.device == nullptr) {
      return backends.device_error.WithContext(variable.substr(0, variable.size() - 2));
    }
    if (nccl && backends.collectives == nullptr) {
      return FailedPrecondition(variable + backends.collectives_error.message() +
                                "; KOLO_GPU_OPERATIONS=ring runs GPU tensors without NCCL");
    }
    StatusOr<int> count = backends.device->DeviceCount();
    if (!count.ok()) return Status(count.status().code(), variable + count.status().message());
    if (*count == 0) {
      return FailedPrecondition(variable + "no GPU is visible to this process (" +
                                backends.device->name() + " reports 0 devices)");
    }
  }
  return std::unique_ptr<GpuPlane>(new GpuPlane(options, std::move(wiring), std::move(backends),
                                                nccl, host, mesh, std::move(logger)));
}

GpuPlane::GpuPlane(const Options& options, Wiring wiring, GpuBackends backends, bool nccl,
                   Executor* host, DataPlane* mesh, Logger logger)
    : options_(options),
      wiring_(std::move(wiring)),
      backends_(std::move(backends)),
      nccl_(nccl),
      host_(host),
      mesh_(mesh),
      logger_(std::move(logger)) {}

GpuPlane::~GpuPlane() {
  Stop();  // the libraries (backends_) go last, as a member
}

void GpuPlane::Stop() {
  // The executors first (they wait for their device work), then the communicator.
  std::unique_ptr<gpu::GpuExecutor> executor;
  {
    MutexLock lock(&mu_);
    executor = std::move(gpu_executor_);
  }
  executor.reset();
  staged_executor_.reset();
  comms_.reset();
}

const char* GpuPlane::path_name() const {
  return nccl_ ? "nccl" : "ring";
}

StatusOr<int> GpuPlane::UsableDevices() {
  MutexLock lock(&mu_);
  if (!counted_) {
    device_count_ = backends_.device->DeviceCount();
    counted_ = true;
  }
  return device_count_;
}

Status GpuPlane::CheckOp(const TensorMeta& meta, const TensorView& input,
                         const TensorView& output) {
  const std::string what = OpTypeName(meta.op) + " '" + meta.name + "'";
  const std::string where = what + " is on " + DeviceName(input.device) + ", but ";
  if (backends_.device == nullptr) {
    return Status(backends_.device_error.code(), where + backends_.device_error.message());
  }
  StatusOr<int> count = UsableDevices();
  if (!count.ok()) return Status(count.status().code(), where + count.status().message());
  const int device = input.device.index;
  if (device >= *count) {
    return InvalidArgument(where + "this process sees " + std::to_string(*count) + " GPU(s)");
  }
  auto other_gpu = [&](int fixed) {
    return InvalidArgument(where + "this rank's earlier GPU ops ran on cuda:" +
                           std::to_string(fixed) + "; kolo uses one GPU per rank");
  };
  {
    MutexLock lock(&mu_);
    if (device_ >= 0 && device != device_) return other_gpu(device_);
  }
  auto check = [&](const char* role, const TensorView& t) -> Status {
    if (t.data == nullptr) return Status::Ok();  // empty, or allocated later
    Status ok = backends_.device->CheckDevicePointer(t.data, t.num_bytes(), device);
    if (ok.ok()) return ok;
    return Status(ok.code(), what + ": the " + role + " is not device memory of " +
                                 DeviceName(input.device) + " (" + ok.message() + ")");
  };
  KOLO_RETURN_IF_ERROR(check("input", input));
  if (output.data != input.data) KOLO_RETURN_IF_ERROR(check("output", output));
  if (nccl_ && !gpu::NcclHasDataType(meta.dtype)) {
    return InvalidArgument(what + ": NCCL has no " + DataTypeName(meta.dtype) +
                           " type; convert the tensor, or run KOLO_GPU_OPERATIONS=ring");
  }
  const bool scaled = meta.prescale != 1.0 || meta.postscale != 1.0;
  const bool sum_or_average =
      meta.reduce_op == ReduceOp::kSum || meta.reduce_op == ReduceOp::kAverage;
  if (nccl_ && scaled && (!IsFloatingPoint(meta.dtype) || !sum_or_average)) {
    return InvalidArgument(what +
                           ": NCCL scales only floating-point sums and averages "
                           "(ncclRedOpCreatePreMulSum), and this is a " +
                           ReduceOpName(meta.reduce_op) + " of " + DataTypeName(meta.dtype) +
                           "; scale the tensor yourself, or run KOLO_GPU_OPERATIONS=ring");
  }
  // The first op that passed every check fixes this rank's GPU (a refused one fixes nothing).
  MutexLock lock(&mu_);
  if (device_ < 0) device_ = device;
  if (device != device_) return other_gpu(device_);  // another thread's first op won
  return Status::Ok();
}

bool GpuPlane::RunsAsync(const Response& response) const {
  return response.gpu && nccl_;
}

std::optional<uint64_t> GpuPlane::StageInput(const OpSignature& op, const TensorEntry& entry) {
  if (!entry.input.device.is_cpu()) return std::nullopt;
  return host_->StageInput(op, entry);
}

Status GpuPlane::Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                         PhaseObserver* observer) {
  if (!response.gpu) return host_->Execute(response, entries, observer);
  if (nccl_) return Internal("a GPU response of the nccl path was executed, not launched");
  KOLO_RETURN_IF_ERROR(Start(response, entries));
  return staged_executor_->Execute(response, entries, observer);
}

Status GpuPlane::Launch(const Response& response, const std::vector<TensorEntry*>& entries,
                        PhaseObserver* observer, Done done) {
  if (!RunsAsync(response)) return Internal("a response that runs synchronously was launched");
  KOLO_RETURN_IF_ERROR(Start(response, entries));
  gpu::GpuExecutor* executor = nullptr;
  {
    MutexLock lock(&mu_);
    executor = gpu_executor_.get();
  }
  return executor->Launch(response, entries, observer, std::move(done));
}

void GpuPlane::Interrupt(const Status& why) {
  host_->Interrupt(why);
  MutexLock lock(&mu_);
  if (gpu_executor_ != nullptr) gpu_executor_->Interrupt(why);
}

Status GpuPlane::Start(const Response& response, const std::vector<TensorEntry*>& entries) {
  {
    MutexLock lock(&mu_);
    if (!start_failure_.ok()) return start_failure_;
    if (gpu_executor_ != nullptr || staged_executor_ != nullptr) return Status::Ok();
  }
  int device = -1;
  const Status agreed =
      AgreeOnPath("agreeing on the GPU path at " + DescribeOp(response.op, entries), &device);
  if (!agreed.ok()) {
    MutexLock lock(&mu_);
    start_failure_ = agreed;
    return agreed;
  }
  MakeExecutor(device);
  return Status::Ok();
}

Status GpuPlane::AgreeOnPath(const std::string& what, int* device) {
  Status local;
  if (backends_.device == nullptr) {
    local = backends_.device_error;
  } else if (StatusOr<int> count = UsableDevices(); !count.ok()) {
    local = count.status();
  } else if (*count == 0) {
    local = FailedPrecondition("no GPU is visible to this process");
  } else {
    MutexLock lock(&mu_);
    *device = device_ >= 0 ? device_ : wiring_.local_rank % *count;
  }
  const uint8_t mine = !local.ok() ? kNoGpu : nccl_ ? kNccl : kRing;
  KOLO_ASSIGN_OR_RETURN(std::vector<uint8_t> paths,
                        AllgatherRankBytes(*mesh_, options_.rank, options_.size, mine, what));
  std::string differ;
  for (int r = 0; r < options_.size; ++r) {
    const uint8_t path = paths[static_cast<size_t>(r)];
    if (path == kNoGpu || path != mine) {
      differ +=
          (differ.empty() ? "" : ", ") + ("rank " + std::to_string(r) + ": ") + PathText(path);
    }
  }
  if (differ.empty()) return Status::Ok();
  return FailedPrecondition(
      "the ranks cannot run GPU tensors the same way (KOLO_GPU_OPERATIONS must be the same on "
      "every rank, and every rank needs a usable GPU): this rank runs " +
      std::string(PathText(mine)) + "; " + differ +
      (local.ok() ? "" : "; here: " + local.message()));
}

void GpuPlane::MakeExecutor(int device) {
  if (nccl_) {
    // NCCL reads its variables once, at its first bootstrap: set what the user left unset
    // (setenv, on the background thread, before any NCCL call that reads them).
    for (const gpu::NcclEnvDefault& var : gpu::NcclEnvironmentDefaults(wiring_.network_interface)) {
      if (std::getenv(var.name.c_str()) != nullptr) continue;
      setenv(var.name.c_str(), var.value.c_str(), /*overwrite=*/0);
      logger_->info("{}={} ({})", var.name, var.value, var.why);
    }
    CommBootstrap::Config bootstrap;
    bootstrap.rank = options_.rank;
    bootstrap.size = options_.size;
    bootstrap.timeout_seconds = options_.timeout_seconds;
    bootstrap.clock = wiring_.clock;
    comms_ =
        std::make_unique<CommBootstrap>(backends_.collectives.get(), mesh_, bootstrap, logger_);
    gpu::GpuExecutor::Config executor;
    executor.rank = options_.rank;
    executor.size = options_.size;
    executor.device = device;
    executor.fusion_threshold_bytes = static_cast<size_t>(options_.fusion_threshold_bytes);
    executor.completion.timeout_seconds = options_.timeout_seconds;
    executor.completion.clock = wiring_.clock;
    CommBootstrap* comms = comms_.get();
    auto made = std::make_unique<gpu::GpuExecutor>(
        backends_.device.get(), backends_.collectives.get(),
        [comms](int d) { return comms->Get(d); }, executor, logger_);
    MutexLock lock(&mu_);
    gpu_executor_ = std::move(made);
  } else {
    staged_executor_ = std::make_unique<gpu::StagedExecutor>(
        backends_.device.get(), host_, options_.timeout_seconds, wiring_.clock);
  }
  logger_->info("GPU tensors run over {} ({}) on cuda:{}", path_name(),
                nccl_ ? backends_.collectives->name() : backends_.device->name(), device);
}

}  // namespace kolo
