// StagedExecutor: GPU tensors through kolo's CPU collectives (KOLO_GPU_OPERATIONS=ring), the
// path for builds without NCCL and for several ranks sharing one GPU (NCCL refuses two ranks
// on one device). Each op copies its device inputs into page-locked host memory, runs the
// host executor (the TCP ring or shared memory) over host views of the same entries, and copies
// the results back; the bytes and the order of reduction are the CPU path's, so results are
// bit-identical to it. It needs only the DeviceApi.
//
// Threading: background thread only (like every synchronous Executor). Execute blocks until
// the outputs on the device hold the results; each device wait is bounded by
// KOLO_TIMEOUT_SECONDS.
#pragma once

#include <memory>
#include <vector>

#include "core/clock.h"
#include "core/executor.h"
#include "ops/gpu/device_api.h"
#include "ops/gpu/pinned_pool.h"

namespace kolo::gpu {

class StagedExecutor final : public Executor {
 public:
  // `device` and `host` must outlive this executor. `timeout_seconds` bounds every wait for
  // the device (KOLO_TIMEOUT_SECONDS).
  StagedExecutor(DeviceApi* device, Executor* host, double timeout_seconds,
                 const Clock* clock = SteadyClock::Get());
  ~StagedExecutor() override;

  Status Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                 PhaseObserver* observer) override;

 private:
  // Kolo's stream on `device` (made once); the event that marks its work done.
  Status Prepare(int device);
  // Enqueues `copies` of `kind` and waits until they are done, to the deadline.
  Status CopyAndWait(const std::vector<CopySpan>& copies, CopyKind kind, const std::string& what);
  // A device entry's host view for the host executor, and where its result goes back.
  struct Staged {
    TensorEntry* entry = nullptr;       // the device entry
    std::unique_ptr<TensorEntry> host;  // its view in pinned host memory
    void* device_out = nullptr;         // where the result goes; null: nothing to copy back
  };
  // Fills `staged` for `entry` (its input's copy to the host appended to `to_host`); its
  // output's host memory is taken now, or by its allocator's call when the size is known only
  // then. `staged` must not move until the host executor returns (the allocator refers to it).
  Status Stage(TensorEntry* entry, Staged* staged, std::vector<CopySpan>* to_host);

  DeviceApi* const device_;
  Executor* const host_;
  const double timeout_seconds_;
  const Clock* const clock_;
  int device_index_ = -1;
  StreamHandle stream_ = nullptr;
  EventHandle done_ = nullptr;
  PinnedPool pinned_;
};

}  // namespace kolo::gpu
