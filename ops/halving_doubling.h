// Halving-doubling allreduce (Rabenseifner's): the bandwidth-optimal allreduce for a
// power-of-two number of ranks in 2 log2(n) pairwise steps instead of the ring's 2(n-1).
// Reduce-scatter by recursive halving (step k: swap half of the current range with
// rank XOR n/2^(k+1), keep and reduce the other half), then allgather by recursive doubling
// (the ranges in reverse). It moves the ring's bytes, but each step is a swap on one connection
// in both directions, and fewer dependent steps mean fewer waits on a peer that is not running
// (4 ranks on 2 cores). Each element is fully reduced on one rank and copied to the others, so
// every rank ends with the same bits. Used by DataPlaneAllreduce (ops/data_plane_allreduce.h).
//
// Threading: on the caller's thread (the one that may call DataPlane::Exchange); the scratch
// belongs to that thread.
#pragma once

#include <string>
#include <vector>

#include "core/data_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/ring_allreduce.h"
#include "ops/segmented_buffer.h"

namespace kolo::ops {

// One pairwise step of rank `rank` among `n` (a power of two) for `count` elements: swap with
// `partner`, sending elements `send` and receiving `recv` (reduced into the buffer if `reduce`,
// else written). Exposed for tests.
struct HalvingDoublingStep {
  int partner = 0;
  ElementRange send;
  ElementRange recv;
  bool reduce = false;
};
std::vector<HalvingDoublingStep> HalvingDoublingSchedule(size_t count, int rank, int n);

// Reduces `buffer` across all ranks of `plane` with `op`, in place (kAverage as a sum). Needs
// plane.size() a power of two (otherwise InvalidArgument). Every rank must call it with the
// same size, dtype and op. Blocks until done. Errors as RingAllreduce's: from the data plane
// (naming the peer), prefixed with `what`, leaving the buffer partly reduced.
Status HalvingDoublingAllreduce(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype,
                                ReduceOp op, RingScratch& scratch, const std::string& what);

}  // namespace kolo::ops
