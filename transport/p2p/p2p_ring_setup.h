// ConnectP2pRings: at point-to-point lane start (P2pLane::Start), the shared-memory rings
// (p2p_ring.h) of every pair of ranks on one host, agreed over the pair's socket before any
// other message: the lower rank creates the pair's segment and sends its name (kRing; an empty
// name where it has no rings), the higher rank maps it and answers whether it did, and the lower
// rank then unlinks the name. A pair uses rings only where both ends did; any other pair, and
// every pair on different hosts, goes on over its socket alone.
//
// Threading: the lane's Start only, before its thread runs. Waits at most `timeout_seconds`.
#pragma once

#include <memory>
#include <vector>

#include "core/logging.h"
#include "kolo/status.h"
#include "transport/p2p/p2p_ring.h"

namespace kolo::transport {

// `fds` by rank (-1: no connection), `same_host` by rank; `enabled`: this rank may use rings
// (KOLO_TRANSPORT=tcp says no). Returns the rings by rank (null: that pair has none), or an error
// naming the peer that did not answer in time or hung up.
StatusOr<std::vector<std::unique_ptr<P2pRing>>> ConnectP2pRings(
    int rank, const std::vector<bool>& same_host, bool enabled, const std::vector<int>& fds,
    double timeout_seconds, const Logger& logger);

}  // namespace kolo::transport
