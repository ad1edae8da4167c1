// The data plane without the runtime around it, for kolo-bench's raw mode (the runtime's
// overhead is measured against it; docs/PERFORMANCE.md). Not part of kolo's API: no negotiation, no
// agreement checks, no queue. Every rank must call it at the same point of its program with
// the same count and dtype while no other op is in flight, or the ranks deadlock until the
// data-plane deadline.
//
// Threading: from the thread that drives the benchmark, never from a kolo callback. The
// collective runs on that thread, through the executor ops use, while the background thread
// keeps off it (BackgroundLoop::RunWithDataPlane): no hand-off between threads, which is
// runtime overhead, not the data plane's.
#pragma once

#include <cstdint>

#include "kolo/kolo.h"

namespace kolo::internal {

// Sums `count` elements of `dtype` at `data` across the ranks of the default runtime, in
// place, exactly as the executor runs a one-tensor allreduce response.
Status RawAllreduce(void* data, int64_t count, DataType dtype);

}  // namespace kolo::internal
