// HierarchicalAllreduce: the allreduce of a job whose ranks sit on several hosts, in three
// steps that cross the hosts' links with each byte once per host and spread it over all of a
// host's ranks: a reduction within the host, so that local rank i holds block i of the buffer
// reduced over the host; an allreduce of block i across the hosts among the ranks whose local
// rank is i (DataPlaneAllreduce over `cross`, so each host's local ranks each carry their own
// block and every host link is busy at once); and an allgather of the blocks within the host.
// Blocks are the ChunkRange()s of the elements over the host's ranks (sizes differ by at most
// one element; empty when there are fewer elements than local ranks).
//
// Within the host: over the host's SharedMemoryPlane when there is one (ShmAllreduce of the
// whole buffer, then ShmAllgatherBlocks), else a ring reduce-scatter and a ring allgather over
// `local` (the host's ranks on the TCP mesh).
//
// Every rank ends with the same bits (each block is reduced by one cross allreduce, which
// gives its ranks the same bits, then copied). The order of the floating-point additions
// differs from the flat DataPlaneAllreduce's, so the bits may differ from what the flat path
// gives in the last place; exactly representable sums are the same.
//
// Threading: on the caller's thread (the one that may call DataPlane::Exchange on both
// planes and own the shared-memory plane); the scratch belongs to it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/data_plane.h"
#include "core/shared_memory_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/ring_allreduce.h"
#include "ops/shm_allreduce.h"

namespace kolo::ops {

class HierarchicalAllreduce {
 public:
  // `local`: this host's ranks; `cross`: the ranks of the other hosts with this rank's local
  // rank, one per host; `local_shm` (may be null): the host's ranks over shared memory, in the
  // order of `local`. Every host has local.size() ranks. All must outlive this object.
  HierarchicalAllreduce(DataPlane& local, DataPlane& cross, SharedMemoryPlane* local_shm);

  // Reduces `count` elements at `buffer` in place over every rank of the job. `op` as for
  // DataPlaneAllreduce (average sums; the caller divides). Collective: every rank calls it
  // with the same count, dtype and op. Errors are job-fatal and start with `what` and the step.
  Status Run(void* buffer, size_t count, DataType dtype, ReduceOp op, RingScratch& scratch,
             const std::string& what);

  int hosts() const { return cross_.size(); }
  int ranks_per_host() const { return local_.size(); }
  bool over_shared_memory() const { return shm_allreduce_ != nullptr; }

 private:
  DataPlane& local_;
  DataPlane& cross_;
  SharedMemoryPlane* const local_shm_;
  const std::unique_ptr<ShmAllreduce> shm_allreduce_;  // null without local_shm_
  std::vector<ReduceSpan> spans_;                      // the one span of ShmAllreduce::Run
};

}  // namespace kolo::ops
