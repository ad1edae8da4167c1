// ShmReducescatter: reduce-scatter through a SharedMemoryPlane (core/shared_memory_plane.h) for
// jobs whose ranks share one host. The input holds one block per rank, back to back in rank
// order; rank j ends with block j reduced over every rank, in rank order (rank 0's values
// first, as ShmAllreduce reduces its slices, so the bits are those an allreduce over shared
// memory gives for that block). In rounds: each rank copies, for every other rank r, the next
// piece of block r into its own slot (piece r of the slot, slot_bytes / size bytes each), syncs,
// then reduces the same piece of its own block from its input and the other ranks' slots
// straight into its output. Each rank copies (size − 1) / size of its input once and reads what
// it reduces; nothing is copied back out (ShmAllreduce would copy every block out to every rank).
// Rounds alternate between the slot sets, so one sync per round is enough, as in
// ShmAllgatherBlocks.
//
// Threading: background thread only (the plane's owner).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/shared_memory_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo::ops {

// `input`: every rank's block, `block_elements[r]` elements each (the same vector on every
// rank); `output`: this rank's block of the result (block_elements[rank] elements; may be the
// input's own block, in place, but no other part of it). Average reduces as sum (the caller
// divides). Collective; fails (job-fatal) when a sync fails; `what` prefixes the message.
Status ShmReducescatter(SharedMemoryPlane& plane, const void* input, void* output,
                        const std::vector<size_t>& block_elements, DataType dtype, ReduceOp op,
                        const std::string& what);

}  // namespace kolo::ops
