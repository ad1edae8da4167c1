// RuntimeImpl: the composition root (DESIGN.md §9). It wires the concrete backends — the gRPC
// controller service (rank 0), the gRPC control channel, the TCP data mesh, the shared-memory
// plane (one-host jobs), the CPU executor and the GPU path (ops/gpu_plane/gpu_plane.h) — to core's
// tensor queue and background loop, and owns all of them.
//
// Threading: Create and Shutdown are called by the Runtime's owner; Enqueue from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "core/autotuner.h"
#include "core/logging.h"
#include "core/loop/background_loop.h"
#include "core/mutex.h"
#include "core/process_sets.h"
#include "core/shared_memory_plane.h"
#include "core/subset_data_plane.h"
#include "core/tensor_queue.h"
#include "core/timeline/op_tracer.h"
#include "core/timeline/timeline_hub.h"
#include "core/wakeup.h"
#include "kolo/kolo.h"
#include "ops/gpu_plane/gpu_plane.h"
#include "runtime/core_share.h"
#include "runtime/host_groups.h"
#include "transport/grpc/control_auth.h"
#include "transport/local/local_control_channel.h"
#include "transport/shm/shm_mesh.h"

namespace kolo {

namespace controller {
class Controller;
}
namespace transport {
class GrpcControlServer;
class GrpcControlChannel;
class TcpMesh;
}  // namespace transport
namespace ops {
class CpuExecutor;
}

struct Topology {
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

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
  // A broadcast root, given as a job rank (as Horovod does), as a rank within `set`; fails
  // naming `what` when the root is not a member. The global set: `root` itself.
  StatusOr<int> RootInSet(const SetMembership& set, int root, const std::string& what) const;
  const Options& options() const { return options_; }
  const Topology& topology() const { return topology_; }
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
  RuntimeImpl(const Options& options, spdlog::level::level_enum level);

  // The start (init()), in the order Start takes the steps; each fails with its own message.
  Status Start();
  // KOLO_TIMELINE: the trace file, open from the start.
  Status OpenTimeline();
  // The job's secret and TLS files; refuses an unauthenticated job whose controller address
  // is not a loopback address.
  Status LoadSecurity();
  // To the hard limit: a large job holds a connection per peer (never fails).
  void RaiseFdLimit();
  // Rank 0: the controller, its gRPC server and rank 0's in-process channel to it; sets the
  // address it listens on (a free port when none was given).
  Status StartController(std::string* controller_address);
  // The rendezvous through the controller, then the data connections to every peer and the
  // shared-memory plane: ListenForPeers, OpenControlChannel, MeetPeers, ConnectPeers,
  // StartSharedMemory.
  Status JoinJob(const std::string& controller_address);
  // The data plane's listener, on KOLO_DATA_ADDR or the interface that routes to the
  // controller.
  Status ListenForPeers(const std::string& controller_address);
  void OpenControlChannel(const std::string& controller_address);
  // KOLO_HIERARCHICAL, in a job on several hosts: makes the host and cross planes (and the
  // host's shared memory, with KOLO_TRANSPORT=auto) where the hosts allow a hierarchical
  // allreduce, and says (at debug level; warning with "on") why not otherwise. Collective
  // among the host's ranks; fails (init fails) when the host's shared memory cannot be made.
  Status StartHostPlanes();
  // Says hello and waits for every rank's (the peer table), until `deadline`; sets topology_
  // and host_groups_.
  StatusOr<std::vector<PeerInfo>> MeetPeers(std::chrono::steady_clock::time_point deadline);
  Status ConnectPeers(const std::vector<PeerInfo>& peers,
                      std::chrono::steady_clock::time_point deadline);
  // Maps the shared-memory plane when Options::transport asks for it (collective).
  Status StartSharedMemory();
  // The configuration of a shared-memory segment among the ranks of `plane` (this rank's place
  // in it), the runtime's timeout, spin and log level: the job's, a host's and a set's.
  // `job_ranks`: the plane's members as job ranks, for messages (empty: the plane is the job).
  transport::ShmMesh::Config ShmConfig(const DataPlane& plane, ShmSingleCopy single_copy,
                                       std::vector<int> job_ranks) const;
  // The CPU executor and the GPU path (GpuPlane; nothing GPU is made until a GPU response).
  Status StartExecutors();
  // The fast path's round lane and the background loop, started.
  void StartLoop();
  // One info line: where this rank stands, and which paths its ops take.
  void LogReady(const std::string& controller_address) const;
  // init()'s error when joining failed with `connect_error`: a deadline names the start
  // timeout and the controller address's variable. (When the controller is reachable, its
  // verdict naming the ranks that never arrived comes first.)
  Status StartFailure(const Status& connect_error);
  // Rank 0 after a failed Start: while its controller aborted the job before every rank said
  // hello, keeps serving so that ranks still starting are refused with the abort's reason
  // (naming the rank that died) instead of retrying until their start timeout and blaming
  // rank 0; returns once every rank has heard it or the start timeout has passed since the
  // controller started.
  void TellLateRanks();
  void Teardown();

  // Makes `meta` (already validated for its set) the op of this thread's process set: the
  // scoped name and group, the set's id. Fails for ops a set cannot run.
  Status ScopeToSet(TensorMeta* meta, int id) const;
  Status EnqueueGroupScoped(std::vector<TensorMeta> metas, const std::vector<TensorView>& inputs,
                            const std::vector<TensorView>& outputs, Callback callback,
                            std::vector<Allocator> allocators);
  // Enqueue once the op is in its set's terms.
  Status EnqueueScoped(TensorMeta meta, const TensorView& input, const TensorView& output,
                       Callback callback, Allocator allocate, std::vector<int64_t>* received_splits,
                       int* int_result);
  // A process set's data path (runtime/set_planes.cc): its members on the TCP mesh; for a set
  // of one host's ranks, their own shared memory; for a set across hosts that allows it
  // (HostGroups::hierarchical), its host and cross planes and its members' shared memory on
  // this host. The executor is declared last, so it goes first.
  struct SetPlane {
    std::unique_ptr<SubsetDataPlane> plane;
    std::unique_ptr<transport::ShmMesh> shm;  // one host's set; null: over TCP
    // A set across hosts, hierarchically: its members on this host, its members with this
    // rank's place on the others, and the first over shared memory (null: TCP); else null.
    std::unique_ptr<SubsetDataPlane> host_plane;
    std::unique_ptr<SubsetDataPlane> cross_plane;
    std::unique_ptr<transport::ShmMesh> host_shm;
    std::unique_ptr<ops::CpuExecutor> executor;
  };
  // The executor of set `id`'s responses, made on first use (loop thread only; every member
  // makes it at the same response, the set's first, so what it makes collectively is made
  // together): over the set's own shared memory when every member is on this host
  // (KOLO_TRANSPORT other than tcp), hierarchically when the members are on several hosts with
  // the same number (more than one) on each (StartSetHierarchy), else rings over TCP.
  Executor* SetExecutor(int id);
  // KOLO_HIERARCHICAL for a set across hosts: its host and cross planes and the host's shared
  // memory among its members there, as StartHostPlanes makes them for the job, with the job's
  // rule; the set's collectives stay flat (logged as StartHostPlanes logs, the warning from the
  // set's first member only) where its hosts do not allow it. Unlike the job's, a host whose
  // segment cannot be made does not fail: its members fall back to TCP within the host (the
  // set is made while the job runs; the other hosts' steps do not depend on it).
  void StartSetHierarchy(int id, const std::vector<int>& members, const HostGroups& groups,
                         SetPlane* set);
  // Shared memory among `job_ranks` (set `id`'s members on this host, over `plane`; `part`:
  // only some of the set's members, the set being across hosts), or null (TCP): when it cannot
  // be made, every one of them falls back together (ShmMesh::Create agrees), with a warning.
  std::unique_ptr<transport::ShmMesh> MakeSetShm(int id, SubsetDataPlane& plane,
                                                 const std::vector<int>& job_ranks,
                                                 ShmSingleCopy single_copy, bool part);
  // Forgets set `id`'s planes (removed, or at teardown); loop thread, or after the loop stopped.
  void DropSetPlane(int id);
  // Constant after Create.
  const Options options_;
  const Logger logger_;
  Topology topology_;
  HostGroups host_groups_;
  CoreShare core_share_;  // the ranks on this rank's CPUs (at least its host's local ranks)
  int own_cpus_ = 1;      // the CPUs this process may run on
  std::chrono::microseconds wait_spin_{0};

  // Outlive everything below that records into them (declared first, destroyed last).
  TimelineHub timeline_;
  OpTracer tracer_;

  // Built by Start(), torn down by Teardown(), in reverse order.
  // Rank 0 with KOLO_AUTOTUNE; read by the controller and the loop, so it outlives both.
  std::unique_ptr<Autotuner> autotuner_;
  std::unique_ptr<controller::Controller> controller_;        // rank 0 only
  std::unique_ptr<transport::GrpcControlServer> server_;      // rank 0 only
  std::chrono::steady_clock::time_point controller_started_;  // rank 0: when server_ started
  // Rank 0 of an elastic generation: the member kolorun's driver reported lost during the start
  // (ElasticStartWatch's thread sets it); -1: none.
  std::atomic<int> elastic_lost_rank_{-1};
  std::unique_ptr<transport::TcpMesh> mesh_;
  std::unique_ptr<transport::ShmMesh> shm_;  // when allreduce runs over shared memory
  // The hierarchical allreduce's groups over mesh_ (runtime/host_groups.h): this host's ranks
  // and this local rank's ranks on the other hosts, and the host's ranks over shared memory
  // (KOLO_TRANSPORT=auto); null while allreduces run flat.
  std::unique_ptr<SubsetDataPlane> host_plane_;
  std::unique_ptr<SubsetDataPlane> cross_plane_;
  std::unique_ptr<transport::ShmMesh> host_shm_;
  // shm_ or host_shm_ (there is never both) for the control channel's fatal handler (its
  // reader thread); null until it is up.
  std::atomic<SharedMemoryPlane*> shm_plane_{nullptr};
  // Rank 0 talks to its own controller through local_channel_ (also the controller's outbox,
  // so it is reset after the controller), the other ranks through grpc_channel_; channel_ is
  // whichever this rank uses.
  std::unique_ptr<LocalControlChannel> local_channel_;           // rank 0 only
  std::unique_ptr<transport::GrpcControlChannel> grpc_channel_;  // ranks > 0
  ControlChannel* channel_ = nullptr;
  transport::ControlSecurity security_;  // set at the start of Start(); holds the key
  std::unique_ptr<ops::CpuExecutor> executor_;
  ProcessSets sets_;
  // Per process set (SetPlane; loop thread only; the fatal handler reaches the shared memory
  // through set_shms_).
  std::map<int, SetPlane> set_planes_;
  // The sets' shared memory, for the control channel's fatal handler (its reader thread), and
  // the first fatal error, for a set's shared memory made after it.
  Mutex set_shms_mu_;
  std::vector<SharedMemoryPlane*> set_shms_ KOLO_GUARDED_BY(set_shms_mu_);
  Status fatal_ KOLO_GUARDED_BY(set_shms_mu_);
  // The loop's executor: GPU responses to the GPU path, the others to executor_.
  std::unique_ptr<GpuPlane> gpu_;
  std::unique_ptr<RoundLane> round_lane_;  // KOLO_FAST_PATH=1: shared memory's or TCP's
  Wakeup wakeup_;
  TensorQueue queue_{&wakeup_};
  std::unique_ptr<BackgroundLoop> loop_;
  // Held by Shutdown, StartTimeline and StopTimeline, so that the loop and the controller are
  // not torn down under a caller.
  Mutex lifecycle_mu_;
  bool shut_down_ KOLO_GUARDED_BY(lifecycle_mu_) = false;
};

// `rank`'s local and cross rank and sizes in `groups` (ComputeHostGroups: ranks sharing a host
// name form a local set, ordered by rank; hosts are numbered by their lowest rank).
Topology ComputeTopology(const HostGroups& groups, int rank);

}  // namespace kolo
