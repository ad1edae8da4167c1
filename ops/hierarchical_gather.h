// The hierarchical broadcast and allgather: the collectives that move data from some ranks to
// every rank, for a job whose ranks sit on several hosts (the hierarchical allreduce's groups:
// ops/hierarchical_allreduce.h). Each crosses the hosts' links among one group of ranks with
// one place on their hosts and leaves the rest to the host's shared memory (or TCP loopback),
// so that the steps between hosts grow with the number of hosts H, not with the job's H·R
// ranks:
//
// - Broadcast from root: the ranks with the root's place on their host (one per host) run the
//   pipelined chain (ops/chain_broadcast.h) from the root across the hosts; then each host's
//   rank of that place broadcasts to its host (ops/shm_broadcast.h, or a chain over TCP). The
//   bytes cross each host's link once, as in the flat chain, with H hops of latency instead of
//   H·R.
// - Allgather of one block per rank: first across the hosts, the R groups of one place at once
//   (a ring each, ops/ring_allgather.h), so every rank holds the blocks of every rank with its
//   place and each host's R ranks carry its link's bytes together; then within the host each
//   rank shares the H blocks it holds (ops/shm_allgather.h, or R-rank rings over TCP). A host
//   link carries R·(H−1) blocks each way (the flat ring over hosts in rank order: R·H−1), and
//   the flat ring's R·H−1 dependent steps over TCP become H−1.
//
// Results are the flat collectives' bytes exactly (nothing is reduced).
//
// Threading: on the caller's thread (the one that may call DataPlane::Exchange on both planes
// and own the shared-memory plane).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/data_plane.h"
#include "core/shared_memory_plane.h"
#include "kolo/status.h"

namespace kolo::ops {

// A job's ranks by host, as this rank sees them. Every host has local->size() ranks.
struct HostPlanes {
  DataPlane* local = nullptr;  // this host's ranks, ascending job rank
  DataPlane* cross = nullptr;  // the ranks with this rank's place on their host, ascending
  SharedMemoryPlane* local_shm = nullptr;  // this host's ranks over shared memory, or null
  std::vector<int> place;  // every job rank's place on its host (its index among the host's)
  int rank = 0;            // this rank's job rank
};

// Broadcasts `bytes` bytes at `buffer` from job rank `root` to every rank, in place (the
// root's buffer holds them). Collective over the job: every rank calls it with the same bytes
// and root. Errors are job-fatal and start with `what` and the step.
Status HierarchicalBroadcast(const HostPlanes& planes, void* buffer, size_t bytes, int root,
                             const std::string& what);

// Gathers every job rank's block into `output`, where they lie back to back in job-rank order,
// `block_bytes[r]` bytes each (the same vector on every rank); this rank's block must be in
// place. Collective over the job. Errors as for HierarchicalBroadcast.
Status HierarchicalAllgather(const HostPlanes& planes, void* output,
                             const std::vector<size_t>& block_bytes, const std::string& what);

}  // namespace kolo::ops
