// BenchDevice: where kolo-bench's tensors live (--device): host memory, a real GPU (cuda), or
// a simulated one (cuda-sim: every rank's runtime runs its GPU path on tests/support/sim_gpu,
// installed before init()). For a GPU, the sweep keeps its exactly-known patterns in host
// memory and copies them to and from device buffers around each timed op (untimed).
//
// Threading: the bench's main thread only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo::bench {

class BenchDevice {
 public:
  virtual ~BenchDevice() = default;
  // "cpu", "cuda" or "cuda-sim".
  virtual std::string name() const = 0;
  // The Device of the bench's tensors.
  virtual Device device() const = 0;
  // Memory for `bytes` bytes on the device (host memory for cpu), freed with this object.
  virtual StatusOr<void*> Alloc(size_t bytes) = 0;
  // Copies between the host and Alloc's memory, waiting until done (a no-op pair for cpu is
  // a memcpy).
  virtual Status Upload(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual Status Download(void* host_dst, const void* device_src, size_t bytes) = 0;
};

// Called before kolo::init(): what must be in place for --device `name` (cuda-sim installs the
// simulated GPU backends for the runtime init() creates). InvalidArgument for an unknown name.
Status PrepareBenchDevice(const std::string& name);

// After init(): the device of this rank (cuda: the local rank's GPU, modulo the GPUs visible).
StatusOr<std::unique_ptr<BenchDevice>> OpenBenchDevice(const std::string& name, int rank,
                                                       int local_rank);

}  // namespace kolo::bench
