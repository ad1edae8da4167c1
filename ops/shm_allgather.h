// ShmAllgatherBlocks: every rank's block of a buffer to every rank, through a
// SharedMemoryPlane's slots (core/shared_memory_plane.h). In chunks of one slot: each rank
// copies the chunk's piece of its own block into its own slot, syncs, and copies the other
// ranks' pieces out of their slots. Consecutive chunks alternate between the slot sets
// (NextSlotSet), so one sync per chunk is enough: a rank refills a set only after the next
// chunk's sync, which every rank reaches after reading this one.
//
// Threading: background thread only (the plane's owner).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/shared_memory_plane.h"
#include "kolo/status.h"

namespace kolo::ops {

// `buffer` holds every rank's block back to back, in rank order, `block_bytes[r]` bytes each
// (the same vector on every rank); this rank's block must be in place. Collective; fails
// (job-fatal) when a sync fails; `what` prefixes the message.
Status ShmAllgatherBlocks(SharedMemoryPlane& plane, void* buffer,
                          const std::vector<size_t>& block_bytes, const std::string& what);

}  // namespace kolo::ops
