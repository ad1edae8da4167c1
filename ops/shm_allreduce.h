// ShmAllreduce: allreduce through a SharedMemoryPlane (core/shared_memory_plane.h) for jobs
// whose ranks share one host. Ops that ShmSingleCopy fits (ops/shm_single_copy.h: the plane has
// single copy, and the op is large enough) go straight between the ranks' tensors; the others,
// and all of them where the host refuses single copy, through the slots, as follows.
// The buffer goes through the plane's slots in chunks of one slot,
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
#include "ops/reduce_spans.h"
#include "ops/shm_single_copy.h"

namespace kolo::ops {

class ShmAllreduce {
 public:
  // `plane` must outlive this object. `tuning`: where single copy starts and its piece size.
  explicit ShmAllreduce(SharedMemoryPlane& plane,
                        const ShmSingleCopy::Tuning& tuning = ShmSingleCopy::Tuning())
      : plane_(plane), single_copy_(plane, tuning) {}

  // Collective: every rank calls it with the same total element count, dtype, op and scaling
  // (the spans may differ only in their pointers). Blocks until every span's output holds the
  // result. Fails (job-fatal: the plane is unusable afterwards) when a sync fails: a rank that
  // does not arrive within the timeout, or an interrupt; `what` prefixes the message.
  Status Run(const std::vector<ReduceSpan>& spans, DataType dtype, ReduceOp op,
             const ReduceScaling& scaling, const std::string& what);

  // Ops that went straight between the tensors (ShmSingleCopy) so far.
  uint64_t single_copy_ops() const { return single_copy_ops_; }

 private:
  // The slot path.
  Status RunThroughSlots(const std::vector<ReduceSpan>& spans, DataType dtype, ReduceOp op,
                         const ReduceScaling& scaling, const std::string& what);
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

  // Constant after construction.
  SharedMemoryPlane& plane_;
  // Background thread only.
  ShmSingleCopy single_copy_;
  uint64_t single_copy_ops_ = 0;
};

}  // namespace kolo::ops
