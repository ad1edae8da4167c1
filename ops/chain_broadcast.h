// Pipelined chain broadcast over a DataPlane: the ranks form a chain starting at the root
// (root, root+1, ..., root-1 mod n); every rank but the last forwards each byte as soon as it
// has it, so a large buffer costs about one transfer plus (n-1) hops of latency, not n-1
// transfers. Called by the CPU executor on the background thread.
#pragma once

#include <cstddef>
#include <string>

#include "core/data_plane.h"

namespace kolo::ops {

// Where this rank sits in the chain of a broadcast from `root`: the rank it receives from and
// the one it sends to (-1: none).
struct ChainLinks {
  int recv_from = -1;
  int send_to = -1;
};
ChainLinks BroadcastChain(int rank, int size, int root);

// Broadcasts `bytes` bytes at `buffer` from `root` to every rank, in place. Blocks until this
// rank has received and forwarded everything. Errors are job-fatal and start with `what`.
Status ChainBroadcast(DataPlane& plane, void* buffer, size_t bytes, int root,
                      const std::string& what);

}  // namespace kolo::ops
