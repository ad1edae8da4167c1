// SimDevice: a simulated GPU behind kolo's DeviceApi, for testing the GPU path on machines
// without one (test support only; never linked into libkolo). It behaves like the real thing
// where that matters for correctness:
// - Device memory the host cannot touch by accident: each allocation is one memory file mapped
//   twice, a no-access view handed out as the device pointer (a host dereference faults, as
//   on a GPU) and a read-write view that only the simulated streams use.
// - A registry of allocations, so a host pointer passed as device memory, a wrong copy kind or
//   a copy past an allocation's end fails with CUDA's own error code and text.
// - One worker thread per stream running its work in order, with an optional delay per
//   operation so a missing synchronisation shows up as wrong data, not as luck.
// - Events with CUDA's record semantics (re-recording replaces the capture; a never-recorded
//   event is complete) and cross-stream waits.
// - Faults: no driver (error 35 with the real text), out of memory past a set size.
//
// Threading: thread-safe, like the CUDA runtime; the current device is per host thread (and
// per SimDevice, so several simulated ranks can live in one process).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "ops/gpu/device_api.h"

namespace kolo::gpu::sim {

class SimDevice final : public DeviceApi {
 public:
  struct Options {
    int device_count = 1;
    // Malloc fails with cudaErrorMemoryAllocation once a device holds this many bytes.
    size_t memory_per_device = size_t{1} << 30;
    // Every stream operation takes at least this long (0: as fast as it goes).
    std::chrono::microseconds op_delay{0};
    // DeviceCount and every other call fail as the CUDA runtime does without a driver.
    bool no_driver = false;
  };

  SimDevice();
  explicit SimDevice(const Options& options);
  // Joins every stream's thread after its work; frees what is still allocated.
  ~SimDevice() override;
  SimDevice(const SimDevice&) = delete;
  SimDevice& operator=(const SimDevice&) = delete;

  std::string name() const override { return "cuda-sim"; }
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

  // For the simulated collectives and tests: the read-write view of device memory at `ptr`
  // (nullptr if it is not device memory of this SimDevice), and the device it is on.
  void* Shadow(const void* ptr, size_t bytes, int* device = nullptr) const;
  // Enqueues `work` on `stream` as one operation (a simulated kernel); a non-OK result is the
  // stream's error from then on, as a failed kernel's is in CUDA.
  Status Enqueue(StreamHandle stream, std::function<Status()> work);

 private:
  struct Allocation {
    size_t bytes = 0;   // as asked for
    size_t mapped = 0;  // rounded up to pages
    int device = 0;     // -1: pinned host memory
    void* shadow = nullptr;
  };
  class Stream;
  struct Event;

  Status CheckDriver(const char* call) const;
  int CurrentDevice() const;
  // The allocation holding [ptr, ptr + bytes), or null.
  const Allocation* Find(const void* ptr, size_t bytes, uintptr_t* base) const;
  Status CheckCopy(const char* call, void* dst, const void* src, size_t bytes, CopyKind kind) const;
  Stream* StreamOf(StreamHandle handle) const;
  std::shared_ptr<Event> EventOf(EventHandle handle) const;  // null: not a live event

  const Options options_;

  mutable std::mutex mu_;
  std::map<uintptr_t, Allocation> allocations_;      // guarded by mu_; by base address
  std::vector<size_t> used_;                         // guarded by mu_; bytes by device
  std::set<Stream*> streams_;                        // guarded by mu_
  std::map<Event*, std::shared_ptr<Event>> events_;  // guarded by mu_; queued markers share them
};

}  // namespace kolo::gpu::sim
