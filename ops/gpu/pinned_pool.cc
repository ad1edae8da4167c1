#include "ops/gpu/pinned_pool.h"

#include <algorithm>

namespace kolo::gpu {

PinnedPool::~PinnedPool() {
  for (const Buffer& b : buffers_) {
    device_->HostFree(b.ptr).IgnoreError();  // nothing to do about it at teardown
  }
}

StatusOr<void*> PinnedPool::Take(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  // The smallest free buffer that fits, so that big ones stay for big tensors.
  Buffer* best = nullptr;
  for (Buffer& b : buffers_) {
    if (!b.taken && b.bytes >= bytes && (best == nullptr || b.bytes < best->bytes)) best = &b;
  }
  if (best != nullptr) {
    best->taken = true;
    return best->ptr;
  }
  KOLO_ASSIGN_OR_RETURN(void* fresh, device_->HostAlloc(bytes));
  buffers_.push_back(Buffer{fresh, bytes, true});
  return fresh;
}

void PinnedPool::Reset() {
  for (Buffer& b : buffers_) b.taken = false;
}

}  // namespace kolo::gpu
