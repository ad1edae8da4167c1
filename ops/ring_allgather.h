// Ring allgather of per-rank blocks of different sizes (allgather concatenates along
// dimension 0, which may differ per rank). Step s of n-1 sends block (r-s) mod n to the right
// neighbour and receives block (r-s-1) mod n from the left straight into its place; the block
// sent at step s > 0 is the one received at step s-1, forwarded as its bytes arrive, so the
// steps pipeline. Called by the CPU executor on the background thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/data_plane.h"

namespace kolo::ops {

// `output` holds every rank's block back to back, in rank order, sizes `block_bytes` (one per
// rank); this rank's block must already be in place. Blocks until every block arrived. Errors
// are job-fatal and start with `what`.
Status RingAllgather(DataPlane& plane, void* output, const std::vector<size_t>& block_bytes,
                     const std::string& what);

// Where one rank's block lies: `bytes` bytes from `offset` into the buffer.
struct BlockAt {
  size_t offset = 0;
  size_t bytes = 0;
};

// As RingAllgather, with the blocks anywhere in `output` (one per rank of `plane`, in its rank
// order; they must not overlap): the hierarchical allgather's steps gather blocks that lie
// between other hosts' blocks (ops/hierarchical_gather.h).
Status RingAllgatherAt(DataPlane& plane, void* output, const std::vector<BlockAt>& blocks,
                       const std::string& what);

}  // namespace kolo::ops
