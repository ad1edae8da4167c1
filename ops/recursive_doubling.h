// Recursive doubling allreduce: the latency-optimal allreduce for small messages on a
// power-of-two number of ranks. log2(n) steps; in step k every rank swaps its whole buffer with
// rank XOR 2^k (one DataPlane::Exchange, both directions at once) and reduces, the lower rank's
// operand first, so that every rank computes the same bits. Against the ring's 2(n-1) dependent
// steps this is one round trip per step at the cost of sending the whole buffer each time, so
// DataPlaneAllreduce (ops/data_plane_allreduce.h) uses it only below a size threshold.
//
// Threading: on the caller's thread (the one that may call DataPlane::Exchange); the scratch
// belongs to that thread.
#pragma once

#include <string>

#include "core/data_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/ring_allreduce.h"
#include "ops/segmented_buffer.h"

namespace kolo::ops {

// True for 1, 2, 4, 8, ...
bool IsPowerOfTwo(int n);

// Reduces `buffer` across all ranks of `plane` with `op`, in place (kAverage as a sum), by
// recursive doubling. Needs plane.size() a power of two and buffer.total() <= scratch.size()
// (the partner's buffer lands in the scratch); otherwise InvalidArgument. Every rank must call
// it with the same size, dtype and op. Blocks until done. Errors as RingAllreduce's: from the
// data plane (naming the peer), prefixed with `what`, leaving the buffer partly reduced.
Status RecursiveDoublingAllreduce(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype,
                                  ReduceOp op, RingScratch& scratch, const std::string& what);

}  // namespace kolo::ops
