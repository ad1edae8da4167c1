// DeviceApi: the seam between kolo's GPU path and a GPU runtime. Everything of the GPU path
// (executor, completion thread, fusion buffers, staging) talks to the device only through
// this interface and CollectiveApi, so it is plain C++ tested against a simulated device
// (tests/support/sim_gpu) and run on the real CUDA runtime by one thin backend. No CUDA type
// appears here: streams and events are opaque handles owned by the backend that made them.
//
// Threading: every method may be called from any thread. The current device is per host
// thread, as in CUDA (SetDevice affects only the calling thread). Asynchronous methods
// (MemcpyAsync, MemsetAsync, RecordEvent, StreamWaitEvent) only enqueue work on the stream and
// return; errors of the enqueued work itself surface at QueryEvent/SynchronizeEvent.
//
// Errors: every failure is a Status whose message names the call and the runtime's own error
// name and text (device_error.h), e.g. "cudaMalloc: cudaErrorMemoryAllocation (2): out of
// memory".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::gpu {

// Opaque: a backend casts its own objects to and from these.
using StreamHandle = struct StreamTag*;
using EventHandle = struct EventTag*;

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
const char* CopyKindName(CopyKind kind);  // "host to device", ...

struct CopySpan {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;

  // "cuda" or "cuda-sim" (for messages and the timeline).
  virtual std::string name() const = 0;

  // Devices visible to this process. With no usable driver: an error saying so (the one
  // message a user on a machine without a GPU sees first).
  virtual StatusOr<int> DeviceCount() = 0;
  // The calling host thread's current device, on which Malloc, CreateStream, ... act.
  virtual Status SetDevice(int device) = 0;
  virtual StatusOr<int> GetDevice() = 0;
  // OK if [ptr, ptr + bytes) lies in one allocation of Malloc on `device`; InvalidArgument
  // naming what it is otherwise (host memory, another device, past the allocation's end).
  virtual Status CheckDevicePointer(const void* ptr, size_t bytes, int device) = 0;

  // Device memory on the current device; Unavailable (out of memory) when it does not fit.
  virtual StatusOr<void*> Malloc(size_t bytes) = 0;
  virtual Status Free(void* ptr) = 0;
  // Page-locked host memory (async copies from it overlap with computation).
  virtual StatusOr<void*> HostAlloc(size_t bytes) = 0;
  virtual Status HostFree(void* ptr) = 0;

  // A stream on the current device that does not synchronise with the legacy default
  // stream; `high_priority`: the device's greatest priority (kolo's communication streams).
  virtual StatusOr<StreamHandle> CreateStream(bool high_priority) = 0;
  virtual Status DestroyStream(StreamHandle stream) = 0;
  // `timing`: ElapsedMs works between two such events (else they are cheaper).
  virtual StatusOr<EventHandle> CreateEvent(bool timing) = 0;
  virtual Status DestroyEvent(EventHandle event) = 0;

  // Captures the work enqueued on `stream` so far; the event completes when that work has.
  // Recording again replaces the capture (CUDA's semantics). An event never recorded counts
  // as complete.
  virtual Status RecordEvent(EventHandle event, StreamHandle stream) = 0;
  // Work enqueued on `stream` after this call waits for `event`'s capture at this call.
  virtual Status StreamWaitEvent(StreamHandle stream, EventHandle event) = 0;
  // True once the captured work completed; false while it runs. An error of that work (an
  // illegal address, say) is returned here.
  virtual StatusOr<bool> QueryEvent(EventHandle event) = 0;
  // Blocks until the captured work completed. Callers that need a deadline poll QueryEvent.
  virtual Status SynchronizeEvent(EventHandle event) = 0;
  // Milliseconds between two completed timing events.
  virtual StatusOr<float> ElapsedMs(EventHandle start, EventHandle end) = 0;

  // Enqueue copies of `kind` on `stream`. Pointers must match the kind (device memory where
  // it says device, host memory where it says host); a mismatch fails at once.
  virtual Status MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                             StreamHandle stream) = 0;
  // Several copies of one kind as one call (the fusion buffer's fill and drain).
  virtual Status MemcpyBatchAsync(const std::vector<CopySpan>& copies, CopyKind kind,
                                  StreamHandle stream) = 0;
  // Sets `bytes` of device memory to `value` (a joined rank's zero tensors).
  virtual Status MemsetAsync(void* dst, int value, size_t bytes, StreamHandle stream) = 0;
};

}  // namespace kolo::gpu
