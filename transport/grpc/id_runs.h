// Cache ids on the wire as bit vectors (docs/PROTOCOL.md, "Cached ops by bit vector"): a list
// of ids travels as IdRuns, each the ascending ids first + i for every bit i set in its bytes,
// so a rank's 161 cached gradients cost ~25 bytes instead of one request each. Used by
// wire_convert.cc for request batches and by-id responses. Internal to transport/grpc/.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kolo/status.h"
#include "proto/kolo.pb.h"

namespace kolo::transport {

// A run ends where the next id is not above the last one, or lies more than this many ids past
// it (a sparse stretch costs more as bits than as separate runs).
inline constexpr uint32_t kMaxIdRunGap = 64;

// The most ids one message may carry in runs: above KOLO_CACHE_CAPACITY's limit (1,000,000),
// so that no real batch reaches it, and low enough that a hostile message of a few MiB of set
// bits cannot make the receiver allocate gigabytes.
inline constexpr size_t kMaxIdsInRuns = size_t{1} << 20;

// The length of the run that starts at ids[0]: 1 when ids[1] does not continue it.
size_t IdRunLength(const uint32_t* ids, size_t count);

// Encodes ids[0 .. count) (ascending, each within kMaxIdRunGap of the one before; IdRunLength
// says how many) as one run into *run.
void EncodeIdRun(const uint32_t* ids, size_t count, wire::IdRun* run);

// Appends the ids of `run` to *ids in order, counting each off *budget (the ids the message
// may still name: kMaxIdsInRuns for its first run). InvalidArgument when the run is malformed
// (no bits, bit 0 unset, an id past 2^32 - 1 or zero) or names more ids than *budget.
Status AppendIdRun(const wire::IdRun& run, size_t* budget, std::vector<uint32_t>* ids);

}  // namespace kolo::transport
