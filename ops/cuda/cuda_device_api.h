// CudaDeviceApi: DeviceApi over the CUDA runtime, one call each (the thin layer the simulator
// stands in for in tests; the same contract tests run against both). Errors carry CUDA's own
// error name and text (ops/gpu/device_error.h).
//
// Threading: thread-safe, as the CUDA runtime is; the current device is per host thread.
#pragma once

#include "ops/gpu/device_api.h"

namespace kolo::gpu {

class CudaDeviceApi final : public DeviceApi {
 public:
  std::string name() const override { return "cuda"; }
  StatusOr<int> DeviceCount() override;
  Status SetDevice(int device) override;
  StatusOr<int> GetDevice() override;
  Status CheckDevicePointer(const void* ptr, size_t bytes, int device) override;
  StatusOr<void*> Malloc(size_t bytes) override;
  Status Free(void* ptr) override;
  StatusOr<void*> HostAlloc(size_t bytes) override;
  Status HostFree(void* ptr) override;
  StatusOr<StreamHandle> CreateStream(bool high_priority) override;
  Status DestroyStream(StreamHandle stream) override;
  StatusOr<EventHandle> CreateEvent(bool timing) override;
  Status DestroyEvent(EventHandle event) override;
  Status RecordEvent(EventHandle event, StreamHandle stream) override;
  Status StreamWaitEvent(StreamHandle stream, EventHandle event) override;
  StatusOr<bool> QueryEvent(EventHandle event) override;
  Status SynchronizeEvent(EventHandle event) override;
  StatusOr<float> ElapsedMs(EventHandle start, EventHandle end) override;
  Status MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                     StreamHandle stream) override;
  Status MemcpyBatchAsync(const std::vector<CopySpan>& copies, CopyKind kind,
                          StreamHandle stream) override;
  Status MemsetAsync(void* dst, int value, size_t bytes, StreamHandle stream) override;
};

}  // namespace kolo::gpu
