// ReduceEager: a small allreduce from every rank's input at once, as the fast path's rounds
// deliver them (docs/FAST-PATH.md, "Eager"): no data plane, every rank computes the whole
// result itself. Called by the CPU executor (ops/cpu_executor.cc) on the background thread; a
// pure function over caller-owned memory.
#pragma once

#include <cstddef>

#include "kolo/types.h"
#include "ops/reduce_spans.h"

namespace kolo::ops {

// output = scaling(inputs[0] (op) inputs[1] (op) ... inputs[ranks - 1]), `count` elements of
// `dtype` each: the prescale applied to every input, the reduction in rank order, 0 first, then
// the postscale or integer average. The same kernels in the same order as the shared-memory
// slot path (ops/shm_allreduce.h), so every rank, and that path, get the same bits. `output`
// may not overlap an input; `scratch` holds `count` elements (used only with a prescale).
void ReduceEager(const void* const* inputs, int ranks, void* output, size_t count, DataType dtype,
                 ReduceOp op, const ReduceScaling& scaling, void* scratch);

}  // namespace kolo::ops
