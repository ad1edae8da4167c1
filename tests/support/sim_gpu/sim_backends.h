// SimGpuBackends: makes every kolo runtime created while it lives run its GPU path on a
// simulated GPU (SimDevice) and simulated NCCL (SimCollectives), through the runtime's
// backend factory (ops/gpu_plane/gpu_backends.h). Ranks may be threads of one process (LocalJob) or
// processes (kolorun): SimCollectives meet through the unique id either way. device(rank)
// gives a test the rank's SimDevice to allocate tensors on and to copy them with.
//
// DeviceCopy / ToDevice / FromDevice: blocking copies between host bytes and device memory on
// a stream of their own, each bounded by a deadline.
//
// Threading: one SimGpuBackends at a time per process (it owns the process's factory);
// device() from any thread, valid while that rank's runtime lives.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "kolo/status.h"
#include "tests/support/sim_gpu/sim_collectives.h"
#include "tests/support/sim_gpu/sim_device.h"

namespace kolo::gpu::sim {

class SimGpuBackends {
 public:
  struct Options {
    SimDevice::Options device;
    SimCollectives::Options collectives;
    bool with_collectives = true;  // false: a build "without NCCL" (only ring can run)
    // Adjusts `collectives` for one rank (a fault or a slow init on that rank only).
    std::function<void(int rank, SimCollectives::Options* options)> per_rank;
  };

  SimGpuBackends();
  explicit SimGpuBackends(const Options& options);
  ~SimGpuBackends();  // restores the real backends
  SimGpuBackends(const SimGpuBackends&) = delete;
  SimGpuBackends& operator=(const SimGpuBackends&) = delete;

  // The SimDevice of the runtime of `rank` created last (null before there is one).
  SimDevice* device(int rank);

 private:
  const Options options_;
  std::mutex mu_;
  std::map<int, SimDevice*> devices_;  // guarded by mu_
};

// Copies `bytes` host bytes to fresh device memory of `device` (current device of the calling
// thread); returns the device pointer (freed by the caller), waiting at most `limit`.
StatusOr<void*> ToDevice(DeviceApi& device, const std::vector<uint8_t>& bytes,
                         std::chrono::milliseconds limit = std::chrono::seconds(10));
// `bytes` bytes of device memory at `ptr`, waiting at most `limit`.
StatusOr<std::vector<uint8_t>> FromDevice(
    DeviceApi& device, const void* ptr, size_t bytes,
    std::chrono::milliseconds limit = std::chrono::seconds(10));

}  // namespace kolo::gpu::sim
