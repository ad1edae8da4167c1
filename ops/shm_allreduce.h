// ShmAllreduce: allreduce through a SharedMemoryPlane (core/shared_memory_plane.h) for jobs
// whose ranks share one host. The buffer goes through the plane's slots in chunks of one slot,
// each chunk cut into one slice per rank. Rank j copies every slice of its chunk but its own
// slice j into its own slot and syncs; it then reduces slice j from the ranks' values in rank
// order, 0 first (its own read straight from its input, the others' from their slots), into
// slice j of its own slot, applies the postscale or integer average there, and syncs; finally
// every rank copies slice r of the result out of rank r's slot, for every r. Skipping the copy
// of its own slice saves a pass over 1/p of the data per rank (docs/PERFORMANCE.md, "Bytes
// moved"). With a prescale (applied while copying) every rank copies its whole chunk in and
// the slices are reduced into rank 0's slot, as before that change. Each slice is computed
// once, by one rank, in rank order for every dtype and op either way, so every rank receives
// the same bits, and the bits do not depend on where slices fall. Consecutive chunks alternate
// between the plane's two slot sets (SharedMemoryPlane::NextSlotSet), which is what makes two
// syncs per chunk enough: a rank writes set s again (chunk c + 2) only after the sync that
// ends chunk c + 1, which every rank reaches after copying chunk c out.
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
  // Calls fn(span, first element in the span, first element in the range, element count)
  // for each span's piece of elements [begin, begin + count) of the concatenated spans.
  template <typename Fn>
  static void ForEachPiece(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                           Fn&& fn);
  // Copies elements [begin, begin + count) of the concatenated inputs to `dst`, scaled.
  void GatherInputs(const std::vector<ReduceSpan>& spans, size_t begin, size_t count, uint8_t* dst,
                    DataType dtype, double prescale);
  // Copies `count` result elements from `src` to elements [begin, begin + count) of the
  // concatenated outputs; with `stream`, by non-temporal stores.
  void ScatterOutputs(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                      const uint8_t* src, size_t element_size, bool stream);
  // Reduces this rank's slice of the chunk of `count` elements that starts at element `begin`
  // and is held in set `set`. `own_from_input`: this rank's values come from its input spans
  // and the result goes to its own slot; else every rank's values are in the slots and the
  // result goes to rank 0's.
  void ReduceSlice(const std::vector<ReduceSpan>& spans, size_t begin, int set, size_t count,
                   DataType dtype, ReduceOp op, const ReduceScaling& scaling, bool own_from_input);
  // Applies the postscale or integer average to `n` reduced elements at `result`.
  static void ScaleResult(uint8_t* result, size_t n, DataType dtype, const ReduceScaling& scaling);

  // Constant after construction.
  SharedMemoryPlane& plane_;
};

}  // namespace kolo::ops
