// The one place that says whether this build has the NCCL collective backend
// (ops/nccl/backend_factory.cc is the only file with a KOLO_HAVE_NCCL condition), and its
// options. The runtime (the composition root) creates it here; everything else of the GPU path
// works on the CollectiveApi it returns, or on the simulator in tests.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>

#include "core/clock.h"
#include "kolo/types.h"
#include "ops/gpu/collective_api.h"

namespace kolo::gpu {

// The deadlines of NcclCollectiveApi (the runtime passes KOLO_TIMEOUT_SECONDS).
struct NcclOptions {
  // How long a call that NCCL answered with ncclInProgress (a non-blocking communicator still
  // enqueueing, a group still launching) is polled before it fails with DeadlineExceeded.
  std::chrono::milliseconds call_timeout{60000};
  // How long Destroy waits for ncclCommFinalize before it aborts the communicator.
  std::chrono::milliseconds destroy_timeout{60000};
  // The clock of both deadlines; must outlive the backend.
  const Clock* clock = SteadyClock::Get();
};

// Whether this build has the NCCL backend (KOLO_WITH_NCCL found nccl.h and libnccl).
bool NcclBuilt();
// NCCL_VERSION_CODE of the nccl.h this build compiled against (22809 for 2.28.9); 0 without.
int NcclBuiltVersion();

// Whether NCCL has a type for `dtype` (it has none for int16, uint16 and bool). Every build.
bool NcclHasDataType(DataType dtype);

// NCCL behind CollectiveApi (ops/nccl/nccl_collectives.h). Fails with FailedPrecondition in a
// build without NCCL, saying how to get one, and where the NCCL loaded at run time is older than
// the one kolo was built with (nccl_version.h). Creating it touches no device.
StatusOr<std::unique_ptr<CollectiveApi>> NewNcclCollectiveApi(const NcclOptions& options = {});

}  // namespace kolo::gpu
