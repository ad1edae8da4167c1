// Ring allreduce (DESIGN.md §3): the bandwidth-optimal allreduce over a DataPlane, in place on
// one contiguous buffer, as one pipelined StreamExchange (ops/ring_exchange.h). Called by the
// CPU executor on the background thread; blocks until done. The chunk schedule is exposed as
// pure functions for tests.
//
// Threading: RingAllreduce runs on the caller's thread (the one that may call
// DataPlane::Exchange); a RingScratch belongs to one such thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/data_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/aligned_buffer.h"
#include "ops/segmented_buffer.h"

namespace kolo::ops {

// A half-open range of elements [begin, begin + count).
struct ElementRange {
  size_t begin = 0;
  size_t count = 0;
};

// Chunk `chunk` (0 <= chunk < n) of `count` elements split into `n` contiguous chunks whose
// sizes differ by at most one (the first count % n chunks hold the extra element). Chunks are
// empty when count < n.
ElementRange ChunkRange(size_t count, int n, int chunk);

// One step of the ring as rank `rank` sees it: send chunk `send_chunk` to the right neighbour,
// receive chunk `recv_chunk` from the left one and reduce it into the buffer (`reduce`, the
// scatter-reduce half) or write it there (the allgather half).
struct RingSegment {
  int send_chunk = 0;
  int recv_chunk = 0;
  bool reduce = false;
};

// The 2(n-1) steps of rank `rank` in a ring of `n`: scatter-reduce step s = 0..n-2 sends chunk
// (rank-s) mod n and receives (rank-s-1) mod n; allgather step s sends (rank+1-s) mod n and
// receives (rank-s) mod n. Step k > 0 sends exactly the chunk step k-1 received, which is what
// lets the whole allreduce run as one pipelined stream. After the scatter-reduce half, rank r
// holds the fully reduced chunk (r+1) mod n. Empty for n == 1.
std::vector<RingSegment> RingSchedule(int rank, int n);

// The receive scratch of the reduce steps: received bytes wait here until reduced into the
// buffer. Allocated once (at construction) and reused by every allreduce of its owner.
class RingScratch {
 public:
  static constexpr size_t kDefaultBytes = size_t{4} << 20;
  static constexpr size_t kMinBytes = 64;  // at least a few elements of the widest dtype

  // `bytes` < kMinBytes is raised to kMinBytes.
  explicit RingScratch(size_t bytes = kDefaultBytes)
      : bytes_(bytes < kMinBytes ? kMinBytes : bytes), buffer_(bytes_) {}

  uint8_t* data() { return buffer_.data(); }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  AlignedBuffer buffer_;
};

// Reduces `count` elements of `dtype` at `buffer` across all ranks of `plane` with `op`, in
// place (kAverage reduces as a sum: the caller divides). Every rank must call it with the same
// count, dtype and op. Blocks until done. Returns at once for count == 0 or a single rank.
// Errors come from the data plane (a lost peer, a deadline, an interrupt), prefixed with
// `what`; they leave the buffer partly reduced and the data plane in an unknown state.
Status RingAllreduce(DataPlane& plane, void* buffer, size_t count, DataType dtype, ReduceOp op,
                     RingScratch& scratch, const std::string& what);

// The same over several pieces of memory taken as one buffer in their order (fused tensors
// reduced in place, without a fusion buffer); each piece holds whole elements. The chunks and
// so the order of reduction of every element are those of the contiguous buffer.
Status RingAllreduce(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype, ReduceOp op,
                     RingScratch& scratch, const std::string& what);

}  // namespace kolo::ops
