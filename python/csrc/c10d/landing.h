// Landing: where the output of a kolo op whose size is negotiated (allgather, alltoall) is
// written. kolo's Allocator asks for memory once it knows the shape; when that shape holds the
// elements the caller's c10d output expects, the output tensor itself takes the data (no copy),
// otherwise a buffer of its own does, and Fits() tells the finisher that the ranks disagreed
// about sizes, so it fails the op with a message instead of kolo failing it for lack of memory.
//
// Threading: Allocate runs on the thread that executes the op (kolo's background thread or a
// caller driving it), before the op's callback; the rest is read after completion.
#pragma once

#include <torch/extension.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kolo/op_args.h"

namespace kolo::torch_ext {

class Landing {
 public:
  // `target`: contiguous, of the dtype the op produces, holding the expected element count.
  explicit Landing(at::Tensor target) : target_(std::move(target)) {}

  // kolo's Allocator for `landing`'s output; it keeps `landing` alive.
  static Allocator AllocatorOf(const std::shared_ptr<Landing>& landing);

  bool Fits() const;
  // What arrived: `target` itself, or the buffer that took a differently sized output.
  at::Tensor Arrived() const;
  // "[6, 4]": the shape kolo negotiated (for messages).
  std::string ArrivedShape() const;
  const at::Tensor& target() const { return target_; }

 private:
  void* Allocate(const std::vector<int64_t>& shape);

  const at::Tensor target_;
  mutable std::mutex mu_;
  at::Tensor arrived_;          // guarded by mu_
  std::vector<int64_t> shape_;  // guarded by mu_
};

}  // namespace kolo::torch_ext
