// ShmAllreduce: allreduce through a SharedMemoryPlane (core/shared_memory_plane.h) for jobs
// whose ranks share one host. The buffer goes through the plane's slots in chunks of one slot:
// each rank copies its chunk into its own slot (prescale folded in) and syncs; rank j then
// reduces slice j of the chunk from every rank's slot, in rank order 0..N-1, into rank 0's
// slot, applies the postscale or integer average to it, and syncs; finally every rank copies
// the whole result chunk out. Each slice is computed once, by one rank, in the same order for
// every dtype and op, so every rank receives bitwise-identical results. Consecutive chunks
// alternate between the plane's two slot sets (SharedMemoryPlane::NextSlotSet), which is what
// makes two syncs per chunk enough.
//
// Threading: background thread only (like the executor that owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/shared_memory_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo::ops {

// One tensor of a (possibly fused) allreduce: `count` elements read from `input`, results
// written to `output` (the same pointer for in place).
struct ReduceSpan {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
};

// What happens to the elements besides the reduction.
struct ReduceScaling {
  double prescale = 1.0;   // applied while copying in
  double postscale = 1.0;  // applied to the result
  // > 0: integer average, result * postscale / divisor in one rounding (ScaleDivideInPlace).
  int64_t divisor = 0;
};

class ShmAllreduce {
 public:
  // `plane` must outlive this object.
  explicit ShmAllreduce(SharedMemoryPlane& plane) : plane_(plane) {}

  // Collective: every rank calls it with the same total element count, dtype, op and scaling
  // (the spans may differ only in their pointers). Blocks until every span's output holds the
  // result. Fails (job-fatal: the plane is unusable afterwards) when a sync fails: a rank that
  // does not arrive within the timeout, or an interrupt; `what` prefixes the message.
  Status Run(const std::vector<ReduceSpan>& spans, DataType dtype, ReduceOp op,
             const ReduceScaling& scaling, const std::string& what);

 private:
  // Copies elements [begin, begin + count) of the concatenated inputs to `dst`, scaled.
  void GatherInputs(const std::vector<ReduceSpan>& spans, size_t begin, size_t count, uint8_t* dst,
                    DataType dtype, double prescale);
  // Copies `count` result elements from `src` to elements [begin, begin + count) of the
  // concatenated outputs; with `stream`, by non-temporal stores.
  void ScatterOutputs(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                      const uint8_t* src, size_t element_size, bool stream);
  // Reduces this rank's slice of a chunk of `count` elements held in set `set`.
  void ReduceSlice(int set, size_t count, DataType dtype, ReduceOp op,
                   const ReduceScaling& scaling);

  // Constant after construction.
  SharedMemoryPlane& plane_;
};

}  // namespace kolo::ops
