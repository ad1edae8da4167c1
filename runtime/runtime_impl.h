// RuntimeImpl: the composition root (DESIGN.md §9). It wires the concrete backends to core's
// tensor queue and background loop and owns all of them, in rooms: how this rank reaches the
// controller (ControlPlane: rank 0's controller service, the gRPC control channel), the data
// planes and the CPU executors over them (DataPlanes: the TCP mesh, shared memory, the
// hierarchy's planes, each process set's), and the GPU path (ops/gpu_plane/gpu_plane.h). Its
// start (runtime_start.cc) takes RuntimeStart's steps, each returning the part it built.
//
// Threading: Create and Shutdown are called by the Runtime's owner; Enqueue from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/logging.h"
#include "core/loop/background_loop.h"
#include "core/mutex.h"
#include "core/process_sets.h"
#include "core/tensor_queue.h"
#include "core/timeline/op_tracer.h"
#include "core/timeline/timeline_hub.h"
#include "core/wakeup.h"
#include "kolo/kolo.h"
#include "ops/gpu_plane/gpu_plane.h"
#include "runtime/control_plane.h"
#include "runtime/data_planes.h"
#include "runtime/placement.h"

namespace kolo {

class RuntimeStart;
namespace internal {
class RuntimeAccess;
}

class RuntimeImpl {
 public:
  static StatusOr<std::unique_ptr<RuntimeImpl>> Create(const Options& options);
  ~RuntimeImpl();

  Status Shutdown();
  // Queues validated ops as one group (one batch, one response per dtype, one callback).
  // `allocators`: empty, or one per member (allgather).
  Status EnqueueGroup(std::vector<TensorMeta> metas, const std::vector<TensorView>& inputs,
                      const std::vector<TensorView>& outputs, Callback callback,
                      std::vector<Allocator> allocators = {});
  // `mark_cycles`: rank 0's controller records a CYCLE per planned batch from now on.
  Status StartTimeline(const std::string& path, bool mark_cycles);
  // runtime/raw_data_plane.h: an allreduce response run by the executor directly.
  Status RawAllreduce(void* data, int64_t count, DataType dtype);
  Status StopTimeline();
  // Runtime::AbortJob: hands the abort to the background loop (BackgroundLoop::AbortJob).
  Status AbortJob(const std::string& reason);
  // Queues an op validated by the caller. `allocate` only for ops whose output size is
  // decided by negotiation (allgather).
  Status Enqueue(TensorMeta meta, const TensorView& input, const TensorView& output,
                 Callback callback, Allocator allocate = nullptr,
                 std::vector<int64_t>* received_splits = nullptr, int* int_result = nullptr);

  // Process sets (README, "Process sets"). AddProcessSet and RemoveProcessSet enqueue the
  // collective decision (the callback runs once it is applied here); `id` is set before it.
  // `static_sets`: the whole KOLO_PROCESS_SETS text when init adds its sets (ranks whose
  // texts differ all fail, even when the set at hand agrees), else empty.
  Status AddProcessSetAsync(const std::vector<int>& ranks, int* id, Callback callback,
                            const std::string& static_sets = "");
  Status RemoveProcessSetAsync(int id, Callback callback);
  const ProcessSets& process_sets() const { return sets_; }
  // This thread's current process set (kolo::ProcessSetScope) and this rank's place in it;
  // fails naming `what` when the set is unknown or this rank is not in it.
  StatusOr<SetMembership> CurrentMembership(const std::string& what) const;
  const Options& options() const { return options_; }
  const Topology& topology() const { return placement_.topology; }
  // How long a blocking call or synchronize() polls its op before sleeping (core/spin_wait.h):
  // KOLO_WAIT_SPIN_US when every rank of this host has a core; where the ranks outnumber the
  // cores, a budget set from their number, or zero if KOLO_WAIT_SPIN_US is (runtime_start.cc).
  // Set by Create.
  std::chrono::microseconds wait_spin() const { return wait_spin_; }
  // The data path of GPU tensors resolved at init: "nccl" or "ring" (GpuPlane::path_name).
  std::string gpu_path() const { return gpu_->path_name(); }
  // A blocking call's wait, after it enqueued its op under a TensorQueue::QuietScope: runs
  // the op on the calling thread when the background loop is idle (BackgroundLoop::Drive)
  // for up to wait_spin(), else wakes the loop and polls `done` as long; true once `done()`.
  // The caller then sleeps until its callback, as before.
  bool DriveOrSpin(const std::function<bool()>& done);

 private:
  friend class internal::RuntimeAccess;  // the point-to-point lane (runtime/runtime_access.h)
  RuntimeImpl(const Options& options, spdlog::level::level_enum level);

  // The start (init(), runtime_start.cc): RuntimeStart's steps in their order, each part handed
  // to its room; each fails with its own message.
  Status Start();
  // The rendezvous through the controller, then the data connections to every peer and the
  // shared-memory plane (or the hierarchy's planes).
  Status JoinJob(const RuntimeStart& start, const std::string& controller_address);
  // The background loop over the queue, the control channel and the GPU path, started (with
  // the fast path's round lane where KOLO_FAST_PATH asks for it).
  void StartLoop();
  // Everything the start built, in reverse order; after a failed start too.
  void Teardown();

  Status EnqueueGroupScoped(std::vector<TensorMeta> metas, const std::vector<TensorView>& inputs,
                            const std::vector<TensorView>& outputs, Callback callback,
                            std::vector<Allocator> allocators);
  // Enqueue once the op is in its set's terms.
  Status EnqueueScoped(TensorMeta meta, const TensorView& input, const TensorView& output,
                       Callback callback, Allocator allocate, std::vector<int64_t>* received_splits,
                       int* int_result);

  // Constant after Create.
  const Options options_;
  const Logger logger_;
  Placement placement_;  // set by the start (RuntimeStart::MeetPeers)
  std::chrono::microseconds wait_spin_{0};

  // Outlive everything below that records into them (declared first, destroyed last).
  TimelineHub timeline_;
  OpTracer tracer_;

  // Built by Start(), torn down by Teardown(), in reverse order.
  ControlPlane control_;
  ProcessSets sets_;
  DataPlanes planes_;
  // The loop's executor: GPU responses to the GPU path, the others to the data planes' CPU
  // executor.
  std::unique_ptr<GpuPlane> gpu_;
  Wakeup wakeup_;
  TensorQueue queue_{&wakeup_};
  std::unique_ptr<BackgroundLoop> loop_;
  // Held by Shutdown, StartTimeline and StopTimeline, so that the loop and the controller are
  // not torn down under a caller.
  Mutex lifecycle_mu_;
  bool shut_down_ KOLO_GUARDED_BY(lifecycle_mu_) = false;
};

// A broadcast root, given as a job rank (as Horovod does), as a rank within `set` (of `sets`);
// fails naming `what` when the root is not a member. The global set: `root` itself.
StatusOr<int> RootInSet(const ProcessSets& sets, const SetMembership& set, int root,
                        const std::string& what);

}  // namespace kolo
