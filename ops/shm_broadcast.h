// ShmBroadcast: broadcast through a SharedMemoryPlane (core/shared_memory_plane.h) for jobs
// whose ranks share one host. The root copies the buffer into its slot one chunk at a time;
// after each chunk's sync every other rank copies it out. Chunks alternate between the slot
// sets, so one sync per chunk is enough. Called by the CPU executor.
//
// Threading: background thread only.
#pragma once

#include <cstddef>
#include <string>

#include "core/shared_memory_plane.h"
#include "kolo/status.h"

namespace kolo::ops {

// Collective: every rank calls it with the same `bytes` and `root`. On return every rank's
// `buffer` holds the root's bytes (the root's own buffer is only read). Fails (job-fatal) when a
// sync fails; `what` prefixes the message.
Status ShmBroadcast(SharedMemoryPlane& plane, void* buffer, size_t bytes, int root,
                    const std::string& what);

}  // namespace kolo::ops
