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
#include "ops/ring_allgather.h"

namespace kolo::ops {

// `buffer` holds every rank's block back to back, in rank order, `block_bytes[r]` bytes each
// (the same vector on every rank); this rank's block must be in place. Collective; fails
// (job-fatal) when a sync fails; `what` prefixes the message.
Status ShmAllgatherBlocks(SharedMemoryPlane& plane, void* buffer,
                          const std::vector<size_t>& block_bytes, const std::string& what);

// As ShmAllgatherBlocks, with each rank's share made of several blocks anywhere in `buffer`
// (`shares[r]`: rank r's blocks, in the order they travel; the same on every rank; no two
// overlap): a rank's blocks travel as one stream, cut into slot-sized chunks across block
// edges, so many small blocks cost the syncs of their total, not one each. The hierarchical
// allgather's step within a host (ops/hierarchical_gather.h) shares every block its rank
// gathered across the hosts this way.
Status ShmAllgatherShares(SharedMemoryPlane& plane, void* buffer,
                          const std::vector<std::vector<BlockAt>>& shares, const std::string& what);

}  // namespace kolo::ops
