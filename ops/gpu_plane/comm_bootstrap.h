// CommBootstrap: this rank's NCCL communicator, made when the first GPU response runs (every
// rank is at the same point of the response sequence there, so no extra negotiation is
// needed). It is GpuExecutor's CommProvider (ops/gpu/gpu_executor.h):
//   1. rank 0 makes the unique id and sends it to every rank by a chain broadcast over the data
//      mesh: kolo's authenticated connections, no new port. The id is never logged;
//   2. every rank starts joining the communicator on its device and polls it until it is
//      ready, it failed, or KOLO_TIMEOUT_SECONDS passed (then it aborts it);
//   3. the ranks allgather their outcomes (one byte each) over the mesh, so every rank fails
//      with the same message naming the ranks that failed or did not finish in time.
// A failure is sticky (job-fatal: the caller aborts the job).
//
// Threading: Get on the background thread only (it uses the mesh between responses, as the
// CPU executor does). Destroy after the GpuExecutor that used the comm (its destructor frees
// the communicator).
#pragma once

#include <chrono>

#include "core/clock.h"
#include "core/data_plane.h"
#include "core/logging.h"
#include "kolo/status.h"
#include "ops/gpu/collective_api.h"

namespace kolo {

class CommBootstrap {
 public:
  struct Config {
    int rank = 0;
    int size = 1;
    double timeout_seconds = 30;  // KOLO_TIMEOUT_SECONDS: the init's deadline
    const Clock* clock = SteadyClock::Get();
    std::chrono::microseconds poll_interval{200};  // between two polls of the init
  };

  // `collectives` and `mesh` must outlive this object.
  CommBootstrap(gpu::CollectiveApi* collectives, DataPlane* mesh, const Config& config,
                Logger logger);
  ~CommBootstrap();
  CommBootstrap(const CommBootstrap&) = delete;
  CommBootstrap& operator=(const CommBootstrap&) = delete;

  // The communicator on `device`, made at the first call. A later call for another device is
  // InvalidArgument (one GPU per rank); after a failed bootstrap, that failure again.
  StatusOr<gpu::CommHandle> Get(int device);

 private:
  // Steps 1 and 2: this rank's outcome.
  Status Join(int device);
  // Step 3: the job's verdict from every rank's outcome (`local` is this rank's).
  Status Agree(const Status& local, int device);

  gpu::CollectiveApi* const coll_;
  DataPlane* const mesh_;
  const Config config_;
  const Logger logger_;

  gpu::CommHandle comm_ = nullptr;
  int device_ = -1;
  Status failed_;
};

}  // namespace kolo
