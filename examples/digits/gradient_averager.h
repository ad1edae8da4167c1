// GradientAverager: averages a set of named float tensors across all ranks of the default kolo
// runtime. It enqueues one allreduce_async (ReduceOp::kAverage, in place) per tensor before
// waiting for any, so all are in flight at once and the controller can fuse them into one
// transfer. Average() blocks the calling thread; the callbacks run on kolo's background thread.
#pragma once

#include <chrono>
#include <vector>

#include "examples/digits/mlp.h"
#include "kolo/status.h"

namespace kolo::examples {

class GradientAverager {
 public:
  // Each tensor's name is its kolo op name ("grad/w1"). `limit` bounds one Average(); it is a
  // backstop only, as kolo's own deadlines fail a stuck op first.
  explicit GradientAverager(std::chrono::seconds limit) : limit_(limit) {}

  // Replaces each tensor's values by their average over all ranks. Returns the first error of
  // any op (naming the tensor). Returns only when no op it enqueued can still touch `tensors`,
  // except after DeadlineExceeded: then the caller must kolo::shutdown() (which fails the
  // pending ops) before freeing them.
  Status Average(std::vector<NamedTensor>* tensors) const;

 private:
  const std::chrono::seconds limit_;
};

}  // namespace kolo::examples
