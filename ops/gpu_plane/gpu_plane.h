// GpuPlane: one rank's GPU path, and the executor the background loop runs every response
// through: a response on GPU tensors (Response::gpu) goes to the GPU executor of
// KOLO_GPU_OPERATIONS, every other one to the host executor.
//   nccl: GpuExecutor (ops/gpu/gpu_executor.h) over the collective library, asynchronous; its
//         communicator comes from CommBootstrap (ops/gpu_plane/comm_bootstrap.h);
//   ring: StagedExecutor (ops/gpu/staged_executor.h): staged through page-locked host memory
//         over the host executor, synchronous.
// Both are made at the first GPU response, so a job without GPU tensors never touches a GPU
// library. That first response also checks that every rank runs the same
// KOLO_GPU_OPERATIONS (an allgather of one byte each over the mesh).
//
// CheckOp is the enqueue-time half: whether this rank can run an op on GPU tensors at all (a
// build with CUDA, a usable driver), one GPU per rank, device pointers that are device memory
// of that GPU, and what NCCL cannot express.
//
// Threading: Create on the runtime's thread. CheckOp from any thread. The Executor methods as
// core/executor.h says (background thread; Interrupt from any thread).
#pragma once

#include <memory>
#include <string>

#include "core/clock.h"
#include "core/data_plane.h"
#include "core/executor.h"
#include "core/logging.h"
#include "core/messages.h"
#include "core/mutex.h"
#include "kolo/options.h"
#include "kolo/types.h"
#include "ops/gpu_plane/gpu_backends.h"

namespace kolo {

namespace gpu {
class GpuExecutor;
class StagedExecutor;
}  // namespace gpu
class CommBootstrap;

class GpuPlane final : public Executor {
 public:
  // What the runtime wires in besides the job's options.
  struct Wiring {
    int local_rank = 0;  // a joined rank's stand-ins use GPU local_rank % devices before any op
    const Clock* clock = SteadyClock::Get();
    // The network interface of kolo's data connections: NCCL_SOCKET_IFNAME's default.
    std::string network_interface;
  };

  // Makes the backends (ops/gpu_plane/gpu_backends.h). Reads this rank's rank and the job's size,
  // KOLO_GPU_OPERATIONS, KOLO_TIMEOUT_SECONDS and KOLO_FUSION_THRESHOLD (the device fusion
  // buffer) from `options`, which must outlive the plane. With KOLO_GPU_OPERATIONS set
  // explicitly (not auto) it also checks that the chosen path can run here — its libraries
  // built in, a usable GPU — and fails naming the variable when it cannot. `host` and `mesh`
  // must outlive the plane.
  static StatusOr<std::unique_ptr<GpuPlane>> Create(const Options& options, Wiring wiring,
                                                    Executor* host, DataPlane* mesh, Logger logger);
  static StatusOr<std::unique_ptr<GpuPlane>> Create(Options&&, Wiring, Executor*, DataPlane*,
                                                    Logger) = delete;  // it keeps a reference
  // Stop().
  ~GpuPlane() override;

  // Frees the GPU executor, its device work waited for, and the communicator; CheckOp still
  // answers (a GPU op enqueued after shutdown() then fails in the queue, as every op does).
  // Call once the background loop is gone. Idempotent.
  void Stop();

  // The enqueue-time checks of an op whose tensors are on a GPU (`output` may have no data: an
  // output allocated later). The error names the tensor and what is wrong.
  Status CheckOp(const TensorMeta& meta, const TensorView& input, const TensorView& output);

  // "nccl" or "ring": the path this rank's GPU tensors take.
  const char* path_name() const;

  bool RunsAsync(const Response& response) const override;
  // A CPU op's is the host executor's (Executor::StageInput); a GPU op stages nothing.
  std::optional<uint64_t> StageInput(const OpSignature& op, const TensorEntry& entry) override;
  Status Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                 PhaseObserver* observer) override;
  Status Launch(const Response& response, const std::vector<TensorEntry*>& entries,
                PhaseObserver* observer, Done done) override;
  void Interrupt(const Status& why) override;

 private:
  GpuPlane(const Options& options, Wiring wiring, GpuBackends backends, bool nccl, Executor* host,
           DataPlane* mesh, Logger logger);
  // Whether this rank has a usable GPU: DeviceCount once, remembered. Any thread.
  StatusOr<int> UsableDevices();
  // At the first GPU response: the ranks agree on the path, then the executor is made; a
  // failure is kept and returned again. Background thread.
  Status Start(const Response& response, const std::vector<TensorEntry*>& entries);
  // Allgathers this rank's path (or "no usable GPU") and fails naming the ranks that differ;
  // sets `device` to this rank's GPU.
  Status AgreeOnPath(const std::string& what, int* device);
  // The executor of this rank's path (and, for nccl, its communicator's bootstrap).
  void MakeExecutor(int device);

  // Constant after construction.
  const Options& options_;
  const Wiring wiring_;
  GpuBackends backends_;
  const bool nccl_;  // KOLO_GPU_OPERATIONS resolved: nccl, else ring
  Executor* const host_;
  DataPlane* const mesh_;
  const Logger logger_;

  Mutex mu_;
  bool counted_ KOLO_GUARDED_BY(mu_) = false;  // device_count_ is known
  StatusOr<int> device_count_ KOLO_GUARDED_BY(mu_) = 0;
  int device_ KOLO_GUARDED_BY(mu_) = -1;  // this rank's GPU, fixed by its first GPU op
  // Made by Start on the background thread; Interrupt reads them from any thread.
  Status start_failure_ KOLO_GUARDED_BY(mu_);
  std::unique_ptr<CommBootstrap> comms_;  // background thread; outlives gpu_executor_
  std::unique_ptr<gpu::GpuExecutor> gpu_executor_ KOLO_GUARDED_BY(mu_);
  std::unique_ptr<gpu::StagedExecutor> staged_executor_;  // background thread only
};

}  // namespace kolo
