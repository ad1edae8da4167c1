// What kolo's ops take besides their tensors (kolo/kolo.h): the completion callback, the
// allocator of an output whose size is decided by negotiation, and an allreduce's options.
// A header of its own so that kolo's insides (core/, which queues and checks ops) can name them
// without the API whose functions live in the runtime (docs/DESIGN-NOTES.md, "Layout").
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo {

// Runs once when an op completes (kolo/kolo.h, "Callback contract").
using Callback = std::function<void(const Status&)>;

// Provides the output of an op whose size is known only after negotiation (allgather). Called
// once, on kolo's background thread, with the output's shape (in elements of the op's dtype);
// returns memory for that many elements that stays valid until the callback has run, or
// nullptr, which fails that op (on this rank only) with kInvalidArgument, unless the shape
// holds no elements (an empty vector's data() is fine).
using Allocator = std::function<void*(const std::vector<int64_t>& shape)>;

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kSum;
  // Multiplies each input before the reduction / the result after it. Integer tensors are
  // scaled in double and truncated toward zero, as Horovod does (an out-of-range result
  // saturates); an integer average divides together with the postscale:
  // trunc(sum * postscale / ranks). bool tensors must keep 1.0, and so must integer tensors
  // on a GPU.
  double prescale = 1.0;
  double postscale = 1.0;
};

}  // namespace kolo
