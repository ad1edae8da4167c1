// AlignedBuffer: a cache-line-aligned byte buffer that only ever grows, for the memory the CPU
// collectives reuse across calls (ring scratch, fusion buffer) so that no op allocates large
// buffers on its own. Not thread-safe: owned by one thread (the background thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/check.h"

namespace kolo::ops {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) { Reserve(bytes); }

  // Makes capacity() >= bytes. Growing drops the old contents (callers refill it every op)
  // and at least doubles the capacity, so a slowly growing workload reallocates rarely.
  // Aborts if the memory cannot be had (an allocation failure is not recoverable here).
  void Reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    size_t capacity = bytes > 2 * capacity_ ? bytes : 2 * capacity_;
    capacity = (capacity + kAlignment - 1) / kAlignment * kAlignment;
    data_.reset();
    data_.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlignment, capacity)));
    KOLO_CHECK(data_ != nullptr) << "AlignedBuffer: cannot allocate " << capacity << " bytes";
    capacity_ = capacity;
  }

  uint8_t* data() { return data_.get(); }
  size_t capacity() const { return capacity_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t capacity_ = 0;
};

}  // namespace kolo::ops
