// ShmAlltoall: every rank's block for every other rank, through a SharedMemoryPlane's slots
// (core/shared_memory_plane.h), for the alltoall of ranks that share a host. In chunks of one
// slot: each rank's slot is cut into one part per destination (slot_bytes / size, 64-byte
// aligned); a rank copies the chunk's piece of its block for rank d into part d of its own
// slot, syncs, and copies part `rank` of every other rank's slot into its output. Consecutive
// chunks alternate between the slot sets (NextSlotSet), so one sync per chunk is enough, as in
// ops/shm_allgather.h. The number of chunks is the largest block's, from the byte matrix every
// rank holds, so every rank runs the same chunks and syncs. No single copy: reading the blocks
// straight out of the peers' inputs (process_vm_readv, two syncs in all) was no faster at 4
// ranks on 2 cores from 256 KiB to 16 MiB (docs/PERFORMANCE.md, "Alltoall over shared memory").
//
// Threading: background thread only (the plane's owner).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/shared_memory_plane.h"
#include "kolo/status.h"
#include "ops/pairwise_alltoall.h"

namespace kolo::ops {

// Sends `input`'s `send[d]` to every rank d and receives every rank s's block into `output` at
// `recv[s]`; this rank's own block is copied locally. `matrix_bytes[s * size + d]` is the bytes
// rank s sends rank d, the same on every rank (send[d].bytes and recv[s].bytes are this rank's
// row and column of it). `input` and `output` must not overlap. Collective; fails (job-fatal)
// when a sync fails; `what` prefixes the message.
Status ShmAlltoall(SharedMemoryPlane& plane, const void* input, const std::vector<ByteBlock>& send,
                   void* output, const std::vector<ByteBlock>& recv,
                   const std::vector<size_t>& matrix_bytes, const std::string& what);

}  // namespace kolo::ops
