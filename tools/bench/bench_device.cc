#include "tools/bench/bench_device.h"

#include <chrono>
#include <thread>
#include <vector>

#include "ops/cuda/cuda_backend.h"
#include "tests/support/sim_gpu/sim_backends.h"

namespace kolo::bench {
namespace {

// The simulated GPUs of --device cuda-sim: installed before init(), kept until the process
// exits (the runtime's GPU path uses them until shutdown()).
gpu::sim::SimGpuBackends* Sims() {
  static gpu::sim::SimGpuBackends sims;
  return &sims;
}

// A GPU through kolo's device seam: the real CUDA runtime, or a rank's SimDevice.
class GpuBenchDevice final : public BenchDevice {
 public:
  GpuBenchDevice(std::string name, gpu::DeviceApi* api, std::unique_ptr<gpu::DeviceApi> owned,
                 int index)
      : name_(std::move(name)), api_(api), owned_(std::move(owned)), index_(index) {}
  ~GpuBenchDevice() override {
    if (stream_ != nullptr) api_->DestroyStream(stream_).IgnoreError();  // exiting anyway
    if (event_ != nullptr) api_->DestroyEvent(event_).IgnoreError();
    for (void* p : buffers_) api_->Free(p).IgnoreError();
  }

  Status Open() {
    KOLO_RETURN_IF_ERROR(api_->SetDevice(index_));
    KOLO_ASSIGN_OR_RETURN(stream_, api_->CreateStream(false));
    KOLO_ASSIGN_OR_RETURN(event_, api_->CreateEvent(false));
    return Status::Ok();
  }

  std::string name() const override { return name_; }
  Device device() const override { return Device::Cuda(index_); }
  StatusOr<void*> Alloc(size_t bytes) override {
    KOLO_ASSIGN_OR_RETURN(void* p, api_->Malloc(bytes > 0 ? bytes : 1));
    buffers_.push_back(p);
    return p;
  }
  Status Upload(void* device_dst, const void* host_src, size_t bytes) override {
    return Copy(device_dst, host_src, bytes, gpu::CopyKind::kHostToDevice);
  }
  Status Download(void* host_dst, const void* device_src, size_t bytes) override {
    return Copy(host_dst, device_src, bytes, gpu::CopyKind::kDeviceToHost);
  }

 private:
  Status Copy(void* dst, const void* src, size_t bytes, gpu::CopyKind kind) {
    if (bytes == 0) return Status::Ok();
    KOLO_RETURN_IF_ERROR(api_->MemcpyAsync(dst, src, bytes, kind, stream_));
    KOLO_RETURN_IF_ERROR(api_->RecordEvent(event_, stream_));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      KOLO_ASSIGN_OR_RETURN(bool done, api_->QueryEvent(event_));
      if (done) return Status::Ok();
      if (std::chrono::steady_clock::now() > deadline) {
        return DeadlineExceeded(std::string("a bench copy ") + gpu::CopyKindName(kind) + " of " +
                                std::to_string(bytes) + " bytes took over 60 s");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  const std::string name_;
  gpu::DeviceApi* const api_;
  const std::unique_ptr<gpu::DeviceApi> owned_;  // the real backend; null for the simulator
  const int index_;
  gpu::StreamHandle stream_ = nullptr;
  gpu::EventHandle event_ = nullptr;
  std::vector<void*> buffers_;
};

}  // namespace

Status PrepareBenchDevice(const std::string& name) {
  if (name == "cpu" || name == "cuda") return Status::Ok();
  if (name == "cuda-sim") {
    Sims();
    return Status::Ok();
  }
  return InvalidArgument("--device: unknown device '" + name + "' (one of: cpu cuda cuda-sim)");
}

StatusOr<std::unique_ptr<BenchDevice>> OpenBenchDevice(const std::string& name, int rank,
                                                       int local_rank) {
  std::unique_ptr<GpuBenchDevice> device;
  if (name == "cuda-sim") {
    gpu::sim::SimDevice* sim = Sims()->device(rank);
    if (sim == nullptr) return Internal("--device cuda-sim: this rank's runtime has no sim GPU");
    device = std::make_unique<GpuBenchDevice>(name, sim, nullptr, 0);
  } else if (name == "cuda") {
    KOLO_ASSIGN_OR_RETURN(std::unique_ptr<gpu::DeviceApi> api, gpu::NewCudaDeviceApi());
    KOLO_ASSIGN_OR_RETURN(int count, api->DeviceCount());
    if (count == 0) return FailedPrecondition("--device cuda: no GPU is visible");
    gpu::DeviceApi* raw = api.get();
    device = std::make_unique<GpuBenchDevice>(name, raw, std::move(api), local_rank % count);
  } else {
    return InvalidArgument("--device " + name + " has no device buffers");
  }
  KOLO_RETURN_IF_ERROR(device->Open());
  return std::unique_ptr<BenchDevice>(std::move(device));
}

}  // namespace kolo::bench
