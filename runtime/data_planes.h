// DataPlanes: the runtime's data planes and the CPU executors over them. The job's: the TCP mesh
// to every peer, and either a one-host job's shared memory or, where allreduces run
// hierarchically, the host and cross planes over the mesh (and the host's shared memory); the
// CPU executor over them; the fast path's round lane. Each process set's (set_planes.cc): its
// members on the mesh, with their own shared memory on one host or their own hierarchy across
// hosts, and an executor over them, made on first use. The start builds the job's planes
// (runtime/runtime_start.h) and hands them over in its order; the executors and the sets'
// planes are made here.
//
// Threading: Interrupt from any thread (the control channel's fatal handler, once the mesh is
// here); SetExecutor and DropSet on the loop thread (or after the loop stopped); the rest by
// the runtime's owner, in the start's and the teardown's order.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/autotuner.h"
#include "core/executor.h"
#include "core/logging.h"
#include "core/mutex.h"
#include "core/process_sets.h"
#include "core/round_lane.h"
#include "core/shared_memory_plane.h"
#include "core/subset_data_plane.h"
#include "core/trace_sink.h"
#include "kolo/options.h"
#include "runtime/host_groups.h"
#include "transport/shm/shm_mesh.h"

namespace kolo {

namespace transport {
class TcpMesh;
class P2pLane;
}  // namespace transport
namespace ops {
class CpuExecutor;
}

// What RuntimeStart::StartSharedMemory builds beside the mesh: a one-host job's shared memory
// (`shm`), or the hierarchical allreduce's groups over the mesh (runtime/host_groups.h): this
// host's ranks and this local rank's ranks on the other hosts, and the host's ranks over shared
// memory with KOLO_TRANSPORT=auto (`host_shm`, over `host_plane`); or nothing (flat over TCP).
struct JobShm {
  std::unique_ptr<transport::ShmMesh> shm;
  std::unique_ptr<SubsetDataPlane> host_plane;
  std::unique_ptr<SubsetDataPlane> cross_plane;
  std::unique_ptr<transport::ShmMesh> host_shm;
};

// KOLO_P2P's point-to-point connections: "auto" makes them in jobs of up to kP2pAutoMaxRanks
// ranks (each costs every rank one connection per peer), "on" in any job of several ranks.
inline constexpr int kP2pAutoMaxRanks = 64;
bool P2pConnects(const Options& options);

class DataPlanes {
 public:
  // Reads KOLO_TRANSPORT, KOLO_HIERARCHICAL, KOLO_SHM_SINGLE_COPY, KOLO_FAST_PATH,
  // KOLO_TIMEOUT_SECONDS and KOLO_WAIT_SPIN_US from `options`, which must outlive it.
  DataPlanes(const Options& options, Logger logger);
  DataPlanes(Options&&, Logger) = delete;  // it keeps a reference
  ~DataPlanes();

  // --- The job's, in the start's order. ---
  void AdoptMesh(std::unique_ptr<transport::TcpMesh> mesh);
  transport::TcpMesh* mesh() const { return mesh_.get(); }
  // The configuration of a shared-memory segment among the ranks of `plane` (this rank's place
  // in it), the runtime's timeout, spin and log level: the job's, a host's and a set's.
  // `job_ranks`: the plane's members as job ranks, for messages (empty: the plane is the job).
  transport::ShmMesh::Config ShmConfig(const DataPlane& plane, ShmSingleCopy single_copy,
                                       std::vector<int> job_ranks) const;
  void AdoptShm(JobShm shm);
  // The CPU executor over the job's planes, hierarchical where the host planes are (tuned by
  // `autotuner`, if any, with KOLO_HIERARCHICAL=auto); `groups` are also what the sets'
  // hierarchies follow.
  ops::CpuExecutor* StartExecutor(const HostGroups& groups, Autotuner* autotuner);
  ops::CpuExecutor* executor() const { return executor_.get(); }
  // KOLO_FAST_PATH=1: the fast path's round lane over the mesh's round connections (shared
  // memory's segment for the messages where the job has one, the connections as doorbells);
  // else null.
  RoundLane* StartRoundLane();
  // The point-to-point lane (kolo/p2p.h) over the mesh's point-to-point connections, where
  // P2pConnects says the mesh made them; single copy from the memory of `groups`' ranks on this
  // host unless KOLO_TRANSPORT=tcp or KOLO_SHM_SINGLE_COPY=off. Its ops are traced into `trace`.
  Status StartP2p(const HostGroups& groups, TraceSink* trace);
  // The lane, or null (no connections, or before the start). It lives as long as this object,
  // stopped or not, so a caller that got it may Post (and be refused) while the runtime tears
  // down. Any thread.
  transport::P2pLane* p2p() const { return p2p_.load(); }
  // Where the job's allreduces run: "shared memory", "tcp, hierarchical over ..." or "tcp".
  std::string Describe() const;
  // An abort: a collective blocked in any plane returns at once with `why`, in a set's shared
  // memory made later too. Any thread.
  void Interrupt(const Status& why);

  // --- Each process set's (set_planes.cc), on the loop thread. ---
  // The executor of set `id`'s responses (null when `sets` does not know it), made on first use
  // (every member makes it at the same response, the set's first, so what it makes collectively is
  // made together): over the set's own shared memory when every member is on this host
  // (KOLO_TRANSPORT other than tcp), hierarchically when the members are on several hosts with the
  // same number (more than one) on each (StartSetHierarchy), else rings over TCP.
  Executor* SetExecutor(int id, const ProcessSets& sets);
  // Forgets set `id`'s planes (removed, or at teardown).
  void DropSet(int id);

  // --- Teardown, in RuntimeImpl::Teardown's order. ---
  void DropRoundLane();
  void StopP2p();        // its pending ops fail with kShutdown
  void DropExecutors();  // the job's executor and every set's planes (before the mesh)
  void Reset();          // the job's planes, the mesh last

 private:
  // A process set's data path: its members on the TCP mesh; for a set of one host's ranks,
  // their own shared memory; for a set across hosts that allows it (HostGroups::hierarchical),
  // its host and cross planes and its members' shared memory on this host. The executor is
  // declared last, so it goes first.
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
  // KOLO_HIERARCHICAL for a set across hosts: its host and cross planes and the host's shared
  // memory among its members there, as the start makes them for the job, with the job's rule;
  // the set's collectives stay flat (logged as the start logs the job's, the warning from the
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

  // Constant after construction.
  const Options& options_;
  const Logger logger_;

  // The job's, handed over by the start and reset by the teardown, in reverse order.
  HostGroups host_groups_;  // StartExecutor's
  std::unique_ptr<transport::TcpMesh> mesh_;
  std::unique_ptr<transport::ShmMesh> shm_;  // when allreduce runs over shared memory
  std::unique_ptr<SubsetDataPlane> host_plane_;
  std::unique_ptr<SubsetDataPlane> cross_plane_;
  std::unique_ptr<transport::ShmMesh> host_shm_;
  // shm_ or host_shm_ (there is never both) for Interrupt; null until it is here.
  std::atomic<SharedMemoryPlane*> shm_plane_{nullptr};
  std::unique_ptr<ops::CpuExecutor> executor_;
  std::unique_ptr<RoundLane> round_lane_;
  std::unique_ptr<transport::P2pLane> p2p_owned_;  // destroyed with this object, not at Reset
  std::atomic<transport::P2pLane*> p2p_{nullptr};

  // Per process set (loop thread only; Interrupt reaches their shared memory through
  // set_shms_).
  std::map<int, SetPlane> set_planes_;
  // The sets' shared memory, for Interrupt, and the first fatal error, for a set's shared
  // memory made after it.
  Mutex set_shms_mu_;
  std::vector<SharedMemoryPlane*> set_shms_ KOLO_GUARDED_BY(set_shms_mu_);
  Status fatal_ KOLO_GUARDED_BY(set_shms_mu_);
};

}  // namespace kolo
