// PinnedPool: page-locked host buffers for staging device data, kept for reuse (allocating
// page-locked memory costs milliseconds on a real GPU). Buffers are handed out for one op and
// all given back by Reset; the pool keeps them and frees them when it is destroyed.
//
// Threading: not thread-safe; owned by one executor (the background thread).
#pragma once

#include <cstddef>
#include <vector>

#include "ops/gpu/device_api.h"

namespace kolo::gpu {

class PinnedPool {
 public:
  explicit PinnedPool(DeviceApi* device) : device_(device) {}
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A buffer of at least `bytes` (>= 1) not handed out since the last Reset.
  StatusOr<void*> Take(size_t bytes);
  // Every buffer is free again.
  void Reset();

 private:
  struct Buffer {
    void* ptr;
    size_t bytes;
    bool taken;
  };
  DeviceApi* const device_;
  std::vector<Buffer> buffers_;
};

}  // namespace kolo::gpu
