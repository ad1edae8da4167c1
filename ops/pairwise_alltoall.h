// Alltoall by pairwise exchanges: in step k of n-1, rank r sends its block for rank r+k and
// receives the block of rank r-k, both at once on full-duplex connections, so no step waits
// on another pair. Called by the CPU executor on the background thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/data_plane.h"

namespace kolo::ops {

struct ByteBlock {
  size_t offset = 0;
  size_t bytes = 0;
};

// Sends `input`'s `send[d]` to every rank d and receives every rank s's block into `output`
// at `recv[s]`; this rank's own block is copied locally. Errors are job-fatal and start with
// `what`.
Status PairwiseAlltoall(DataPlane& plane, const void* input, const std::vector<ByteBlock>& send,
                        void* output, const std::vector<ByteBlock>& recv, const std::string& what);

}  // namespace kolo::ops
