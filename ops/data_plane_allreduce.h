// DataPlaneAllreduce: the allreduce the CPU executor runs over a DataPlane (TCP). Picks the
// algorithm by message size and world size: recursive doubling (ops/recursive_doubling.h) for
// small messages on a power-of-two number of ranks, where the ring's 2(n-1) dependent steps cost
// more than the extra bytes; halving-doubling (ops/halving_doubling.h) for larger ones on 4, 8,
// ... ranks (2 log2(n) pairwise steps, the ring's bytes); the pipelined ring
// (ops/ring_allreduce.h) otherwise (2 ranks, where it is the same exchange pipelined, and worlds
// that are not a power of two). Messages of 2 MiB and more run as 1-2 MiB slices one after
// another, each by the same rule (kAllreduceSliceBytes below). All give every rank the same
// bits, so the choice shows only in time.
//
// Threading: on the caller's thread (the one that may call DataPlane::Exchange); the scratch
// belongs to that thread.
#pragma once

#include <cstddef>
#include <string>

#include "core/data_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/ring_allreduce.h"
#include "ops/segmented_buffer.h"

namespace kolo::ops {

// Largest message (bytes) sent by recursive doubling, by world size; measured on TCP loopback
// against the ring (2 ranks) and halving-doubling (4 ranks), docs/PERFORMANCE.md "TCP data
// plane tuning". With 2 ranks it is one swap against the ring's two dependent steps; with more
// it sends the whole buffer log2(n) times, so it stops paying sooner. The crossover moved
// between runs on the shared machine (2 ranks: 64-512 KiB; 4 ranks: 8-16 KiB); these are the
// low ends.
constexpr size_t kRecursiveDoublingMaxBytesTwoRanks = size_t{64} << 10;
constexpr size_t kRecursiveDoublingMaxBytes = size_t{8} << 10;

// Messages of at least twice this many bytes run as consecutive allreduces of parts of
// [kAllreduceSliceBytes, 2 * kAllreduceSliceBytes) each, so that what a rank sends, receives,
// reduces and sends on stays in its cache from the first step to the last: one ring over
// 16 MiB touches 16 MiB on each rank between reading a byte and writing its result. Measured
// over TCP loopback, 2 ranks (docs/PERFORMANCE.md, runs O and P): 16 MiB 5.8 -> 3.2 ms,
// 64 MiB 23 -> 13 ms; 256 KiB and 512 KiB slices were slower, 2 MiB ones bimodal.
constexpr size_t kAllreduceSliceBytes = size_t{1} << 20;

// The number of consecutive allreduces DataPlaneAllreduce runs for `bytes` (1 below
// 2 * kAllreduceSliceBytes).
size_t AllreduceSlices(size_t bytes);

// True if DataPlaneAllreduce runs recursive doubling for `bytes` over `n` ranks with a scratch
// of `scratch_bytes`.
bool UseRecursiveDoubling(size_t bytes, int n, size_t scratch_bytes);

// As RingAllreduce (same arguments, contract and errors), with the algorithm chosen above, over
// AllreduceSlices() parts of the buffer in order: the ChunkRange()s of its elements.
Status DataPlaneAllreduce(DataPlane& plane, void* buffer, size_t count, DataType dtype, ReduceOp op,
                          RingScratch& scratch, const std::string& what);
Status DataPlaneAllreduce(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype,
                          ReduceOp op, RingScratch& scratch, const std::string& what);

}  // namespace kolo::ops
