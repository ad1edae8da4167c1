// GpuBackends: the device and collective libraries one rank's GPU path runs on. In a normal
// process these are the real ones this build has (CUDA, NCCL: ops/cuda, ops/nccl); a test or a
// tool may set a factory that returns others (the simulated GPU of tests/support/sim_gpu) for
// every runtime the process creates afterwards. libkolo.so itself never contains a simulator.
//
// Threading: SetGpuBackendFactory before the init() it should affect, not concurrently with
// one; MakeGpuBackends from any thread.
#pragma once

#include <functional>
#include <memory>

#include "kolo/options.h"
#include "kolo/status.h"
#include "ops/gpu/collective_api.h"
#include "ops/gpu/device_api.h"

namespace kolo {

struct GpuBackends {
  // Null when the build has no CUDA; `device_error` says why (the text GPU tensors are
  // refused with).
  std::unique_ptr<gpu::DeviceApi> device;
  Status device_error;
  // Null when the build has no NCCL (or no CUDA); `collectives_error` says why. Declared after
  // `device`: it may use the device, so it is destroyed first.
  std::unique_ptr<gpu::CollectiveApi> collectives;
  Status collectives_error;
};

// Makes one rank's backends (its Options say which rank, for factories that simulate several
// ranks in one process).
using GpuBackendFactory = std::function<GpuBackends(const Options& options)>;

// Replaces the real backends for the runtimes created after this call; an empty factory
// restores them. For tests and `kolo-bench --device cuda-sim`.
void SetGpuBackendFactory(GpuBackendFactory factory);

// The set factory's backends, else the real ones of this build.
GpuBackends MakeGpuBackends(const Options& options);

}  // namespace kolo
