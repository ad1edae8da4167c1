// What kolo-bench needs of the default runtime beyond the API. RawAllreduce: the data plane
// without the runtime around it, for the raw mode (the runtime's overhead is measured against
// it; docs/PERFORMANCE.md). Not part of kolo's API: no negotiation, no agreement checks, no
// queue. Every rank must call it at the same point of its program with
// the same count and dtype while no other op is in flight, or the ranks deadlock until the
// data-plane deadline.
//
// Threading: from the thread that drives the benchmark, never from a kolo callback. The
// collective runs on that thread, through the executor ops use, while the background thread
// keeps off it (BackgroundLoop::RunWithDataPlane): no hand-off between threads, which is
// runtime overhead, not the data plane's.
#pragma once

#include <cstdint>
#include <string>

#include "kolo/kolo.h"

namespace kolo::internal {

// Sums `count` elements of `dtype` at `data` across the ranks of the default runtime, in
// place, exactly as the executor runs a one-tensor allreduce response.
Status RawAllreduce(void* data, int64_t count, DataType dtype);

// The data path of GPU tensors the default runtime resolved at init (KOLO_GPU_OPERATIONS; auto
// is nccl where an NCCL backend loaded): "nccl" or "ring". FailedPrecondition before init().
StatusOr<std::string> GpuOperationsInUse();

}  // namespace kolo::internal
