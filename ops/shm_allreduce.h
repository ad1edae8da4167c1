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
// Staged (docs/FAST-PATH.md, "Staged inputs"): a small op's input may be copied into its slot
// of the next chunk's set before the op is decided (Stage), at most kStageMaxBytes, one chunk.
// The ranks then tell one another so in their round messages; a run whose every rank staged
// for exactly this chunk (Run's `staged`) skips the copy in and the first sync: the round's
// messages, each sent after its rank's copy, order the copies before the peers' reads. Stage
// writes only this rank's slot of a set whose last chunk every rank finished reading before
// the sync that ended the chunk after it, which this rank has passed.
//
// Threading: background thread only (like the executor that owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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
  // `staged`: every rank staged this op's input for chunk *staged (Stage; the same on every
  // rank). It skips the copy in and the first sync when the op runs through the slots in one
  // chunk, without a prescale, and that chunk is the plane's next (nothing ran in between);
  // otherwise the op runs as without it (the same choice on every rank).
  Status Run(const std::vector<ReduceSpan>& spans, DataType dtype, ReduceOp op,
             const ReduceScaling& scaling, const std::string& what,
             std::optional<uint64_t> staged = std::nullopt);

  // The most bytes Stage copies: a larger op's copy would delay its round message by more than
  // a sync costs, and be wasted each round that does not decide it.
  static constexpr size_t kStageMaxBytes = size_t{16} << 10;
  // Copies `input`'s elements (`count` of `dtype`, no prescale) but this rank's own slice into
  // its slot of the next chunk's set, for a Run of exactly this op as that chunk, and returns
  // the chunk's number; nullopt (nothing copied) when the op would not run that way: single
  // copy, more than one chunk or kStageMaxBytes, a prescale, or a job of one rank.
  std::optional<uint64_t> Stage(const void* input, size_t count, DataType dtype, double prescale);

  // Ops that ran staged (Run skipped the copy in and the first sync) so far.
  uint64_t staged_ops() const { return staged_ops_; }

  // Ops that went straight between the tensors (ShmSingleCopy) so far.
  uint64_t single_copy_ops() const { return single_copy_ops_; }

 private:
  // The slot path.
  Status RunThroughSlots(const std::vector<ReduceSpan>& spans, DataType dtype, ReduceOp op,
                         const ReduceScaling& scaling, const std::string& what,
                         std::optional<uint64_t> staged);
  // A one-chunk op whose every rank's input is in its slot of the next chunk already (Run's
  // `staged`): the reduction, the one sync, the copy out.
  Status RunStaged(const std::vector<ReduceSpan>& spans, size_t total, DataType dtype, ReduceOp op,
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
  uint64_t staged_ops_ = 0;
  std::vector<ReduceSpan> stage_span_;  // Stage's, reused
};

}  // namespace kolo::ops
