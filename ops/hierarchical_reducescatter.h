// The hierarchical reduce-scatter: for a job whose ranks sit on several hosts (the groups of
// ops/hierarchical_gather.h's HostPlanes), rank r ends with block r of the buffer reduced over
// every rank, in two steps whose traffic between hosts runs among ranks of one place:
//
// 1. Within the host: a reduce-scatter among the host's R ranks in which local rank p (place p)
//    receives, reduced over the host, the blocks of every job rank with place p, one per host
//    (ops/shm_reducescatter.h over the host's shared memory, else a ring over TCP).
// 2. Across the hosts: the ranks of place p, one per host, ring-reduce-scatter those H blocks
//    (ops/ring_reducescatter.h over the cross plane), the R rings at once, so every rank of a
//    host carries a share of its link's bytes.
//
// A host's link carries R·(H−1) blocks each way (the flat ring over hosts in rank order:
// R·H−1), and the flat ring's R·H−1 dependent steps over TCP become H−1. For step 1 to be one
// contiguous reduce-scatter, the buffer holds the blocks place-major (PlaceMajorOrder), not in
// job-rank order: the caller lays them out so when it fills the buffer.
//
// Every rank's result is its block reduced over every rank; the order of the floating-point
// operations differs from the flat ring's, so the bits may differ from it in the last place
// (exactly representable results are the same).
//
// Threading: on the caller's thread (the one that may call DataPlane::Exchange on both planes
// and own the shared-memory plane); the scratch belongs to it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/hierarchical_gather.h"
#include "ops/ring_allreduce.h"

namespace kolo::ops {

// The job ranks in the order their blocks lie in a hierarchical reduce-scatter's buffer: by
// place on their host, then by job rank (so each cross group's blocks lie together, in the
// cross plane's rank order).
std::vector<int> PlaceMajorOrder(const HostPlanes& planes);

// Reduces `buffer`, every job rank's block laid out in PlaceMajorOrder (`block_elements[r]`
// elements for job rank r, indexed by job rank), over the job; on return this rank's block
// holds the result and the rest is scratch. `op` as for RingReducescatterBlocks (average sums;
// the caller divides). Collective over the job: every rank passes the same block sizes, dtype
// and op. Errors are job-fatal and start with `what` and the step.
Status HierarchicalReducescatter(const HostPlanes& planes, void* buffer,
                                 const std::vector<size_t>& block_elements, DataType dtype,
                                 ReduceOp op, RingScratch& scratch, const std::string& what);

}  // namespace kolo::ops
