#include "ops/gpu_plane/gpu_backends.h"

#include <chrono>
#include <utility>

#include "core/mutex.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/nccl/nccl_backend.h"

namespace kolo {
namespace {

// The factory SetGpuBackendFactory set, if any.
struct FactorySlot {
  Mutex mu;
  GpuBackendFactory factory KOLO_GUARDED_BY(mu);
};
FactorySlot& Slot() {
  static FactorySlot slot;
  return slot;
}

GpuBackends RealBackends(const Options& options) {
  GpuBackends backends;
  StatusOr<std::unique_ptr<gpu::DeviceApi>> device = gpu::NewCudaDeviceApi();
  if (!device.ok()) {
    backends.device_error = device.status();
    backends.collectives_error = device.status();
    return backends;
  }
  backends.device = std::move(device).value();
  gpu::NcclOptions nccl;  // a call NCCL keeps in progress ends at KOLO_TIMEOUT_SECONDS
  nccl.call_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(options.timeout_seconds));
  nccl.destroy_timeout = nccl.call_timeout;
  StatusOr<std::unique_ptr<gpu::CollectiveApi>> collectives = gpu::NewNcclCollectiveApi(nccl);
  if (collectives.ok()) {
    backends.collectives = std::move(collectives).value();
  } else {
    backends.collectives_error = collectives.status();
  }
  return backends;
}

}  // namespace

void SetGpuBackendFactory(GpuBackendFactory factory) {
  MutexLock lock(&Slot().mu);
  Slot().factory = std::move(factory);
}

GpuBackends MakeGpuBackends(const Options& options) {
  GpuBackendFactory factory;
  {
    MutexLock lock(&Slot().mu);
    factory = Slot().factory;
  }
  return factory ? factory(options) : RealBackends(options);
}

}  // namespace kolo
