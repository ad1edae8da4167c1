#include "tests/support/sim_gpu/sim_backends.h"

#include <memory>
#include <thread>

#include "ops/gpu_plane/gpu_backends.h"

namespace kolo::gpu::sim {
namespace {

// Enqueues `copy` on a fresh stream and polls its completion until `limit`.
Status CopyAndWait(DeviceApi& device, void* dst, const void* src, size_t bytes, CopyKind kind,
                   std::chrono::milliseconds limit) {
  KOLO_ASSIGN_OR_RETURN(StreamHandle stream, device.CreateStream(false));
  StatusOr<EventHandle> event = device.CreateEvent(false);
  Status status = event.status();
  if (status.ok() && bytes > 0) status = device.MemcpyAsync(dst, src, bytes, kind, stream);
  if (status.ok()) status = device.RecordEvent(*event, stream);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (status.ok()) {
    StatusOr<bool> done = device.QueryEvent(*event);
    if (!done.ok()) {
      status = done.status();
    } else if (*done) {
      break;
    } else if (std::chrono::steady_clock::now() > deadline) {
      status = DeadlineExceeded(std::string("a test copy ") + CopyKindName(kind) +
                                " did not finish in time");
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  device.DestroyStream(stream).IgnoreError();  // `status` is what the test needs
  if (event.ok()) device.DestroyEvent(*event).IgnoreError();
  return status;
}

}  // namespace

SimGpuBackends::SimGpuBackends() : SimGpuBackends(Options{}) {}

SimGpuBackends::SimGpuBackends(const Options& options) : options_(options) {
  SetGpuBackendFactory([this](const kolo::Options& job) {
    GpuBackends backends;
    auto device = std::make_unique<SimDevice>(options_.device);
    if (options_.with_collectives) {
      SimCollectives::Options collectives = options_.collectives;
      if (options_.per_rank) options_.per_rank(job.rank, &collectives);
      backends.collectives = std::make_unique<SimCollectives>(device.get(), collectives);
    } else {
      backends.collectives_error = FailedPrecondition(
          "kolo was built without NCCL (simulated: SimGpuBackends without collectives)");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      devices_[job.rank] = device.get();
    }
    backends.device = std::move(device);
    return backends;
  });
}

SimGpuBackends::~SimGpuBackends() {
  SetGpuBackendFactory(nullptr);
}

SimDevice* SimGpuBackends::device(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(rank);
  return it == devices_.end() ? nullptr : it->second;
}

StatusOr<void*> ToDevice(DeviceApi& device, const std::vector<uint8_t>& bytes,
                         std::chrono::milliseconds limit) {
  KOLO_ASSIGN_OR_RETURN(void* ptr, device.Malloc(bytes.empty() ? 1 : bytes.size()));
  Status copied =
      CopyAndWait(device, ptr, bytes.data(), bytes.size(), CopyKind::kHostToDevice, limit);
  if (!copied.ok()) {
    device.Free(ptr).IgnoreError();  // the copy's error is the one to report
    return copied;
  }
  return ptr;
}

StatusOr<std::vector<uint8_t>> FromDevice(DeviceApi& device, const void* ptr, size_t bytes,
                                          std::chrono::milliseconds limit) {
  std::vector<uint8_t> host(bytes);
  KOLO_RETURN_IF_ERROR(
      CopyAndWait(device, host.data(), ptr, bytes, CopyKind::kDeviceToHost, limit));
  return host;
}

}  // namespace kolo::gpu::sim
