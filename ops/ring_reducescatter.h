// Ring reduce-scatter: the first half of the ring allreduce with chunks cut on row boundaries
// and the schedule shifted so that rank r ends up owning chunk r, fully reduced. Called by the
// CPU executor on the background thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/data_plane.h"
#include "ops/ring_allreduce.h"

namespace kolo::ops {

// The ring steps of rank `rank`: n-1 reduce steps, step s sending chunk (r-s-1) mod n and
// receiving chunk (r-s-2) mod n, so that the last one completes chunk r.
std::vector<RingSegment> ReducescatterSchedule(int rank, int n);

// Reduces `buffer` (`rows` rows of `row_elements` elements) across the ranks in place; on
// return this rank's rows (SplitRows in core/op_validation.h) hold the result, the rest is scratch.
// Errors are job-fatal and start with `what`.
Status RingReducescatter(DataPlane& plane, void* buffer, int64_t rows, int64_t row_elements,
                         DataType dtype, ReduceOp op, RingScratch& scratch,
                         const std::string& what);

// Same over a buffer cut into one block per rank, `block_elements[r]` elements each, back to
// back in rank order: on return block `rank` holds the result. Fused reducescatters lay each
// tensor's part r into block r.
Status RingReducescatterBlocks(DataPlane& plane, void* buffer,
                               const std::vector<size_t>& block_elements, DataType dtype,
                               ReduceOp op, RingScratch& scratch, const std::string& what);

}  // namespace kolo::ops
