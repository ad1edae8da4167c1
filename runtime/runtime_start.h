// RuntimeStart: the steps of init() that build something. RuntimeImpl::Start (runtime_start.cc)
// takes them in order; each builds one part and returns it, or fails with its own message, and
// RuntimeImpl::Start hands the part to the room that owns it (ControlPlane, DataPlanes, the
// placement) before the next step, so that a start that fails tears down what it built.
//
// Threading: the runtime's owner, during RuntimeImpl::Create. Constant: the steps change
// nothing of their own.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/control_channel.h"
#include "core/logging.h"
#include "core/trace_sink.h"
#include "core/wakeup.h"
#include "kolo/options.h"
#include "ops/gpu_plane/gpu_plane.h"
#include "runtime/control_plane.h"
#include "runtime/data_planes.h"
#include "runtime/placement.h"
#include "transport/grpc/control_auth.h"

namespace kolo {

namespace transport {
class TcpMesh;
}

class RuntimeStart {
 public:
  // What MeetPeers learnt: the peer table (every rank holds the same) and where this rank stands.
  struct Meeting {
    std::vector<PeerInfo> peers;
    Placement placement;
  };

  // `options` must outlive it.
  RuntimeStart(const Options& options, Logger logger);
  RuntimeStart(Options&&, Logger) = delete;  // it keeps a reference

  // The job's secret and TLS files; refuses an unauthenticated job whose controller address is
  // not a loopback address.
  StatusOr<transport::ControlSecurity> LoadSecurity() const;
  // To the hard limit: a large job holds a connection per peer (never fails).
  void RaiseFdLimit() const;
  // Rank 0: the controller (recording into `timeline`), its gRPC server and rank 0's in-process
  // channel to it, started; sets the address it listens on (a free port when none was given).
  StatusOr<ControllerParts> StartController(const transport::ControlSecurity& security,
                                            TraceSink* timeline,
                                            std::string* controller_address) const;
  // The data plane's listener, on KOLO_DATA_ADDR or the interface that routes to the
  // controller.
  StatusOr<std::unique_ptr<transport::TcpMesh>> ListenForPeers(
      const std::string& controller_address, const transport::ControlSecurity& security) const;
  // Says hello over `channel` and waits for every rank's (the peer table), until `deadline`
  // (`wakeup` is notified of the control messages that arrive meanwhile).
  StatusOr<Meeting> MeetPeers(ControlChannel& channel, const transport::TcpMesh& mesh,
                              const transport::ControlSecurity& security,
                              std::chrono::steady_clock::time_point deadline, Wakeup* wakeup) const;
  // The data connections to every peer, until `deadline`.
  Status ConnectPeers(transport::TcpMesh& mesh, const std::string& generation,
                      const Meeting& meeting, std::chrono::steady_clock::time_point deadline) const;
  // Maps the shared-memory plane when KOLO_TRANSPORT asks for it (collective), or with
  // KOLO_HIERARCHICAL, in a job on several hosts, makes the host and cross planes (and the
  // host's shared memory, with KOLO_TRANSPORT=auto) where the hosts allow a hierarchical
  // allreduce, and says (at debug level; warning with "on") why not otherwise. Collective among
  // the host's ranks; fails (init fails) when the shared memory cannot be made.
  StatusOr<JobShm> StartSharedMemory(const DataPlanes& planes, const Placement& placement) const;
  // The GPU path (GpuPlane; nothing GPU is made until a GPU response): GPU responses to the
  // GPU executor, the others to `executor`.
  StatusOr<std::unique_ptr<GpuPlane>> StartGpu(Executor* executor, transport::TcpMesh* mesh,
                                               const Topology& topology) const;

 private:
  StatusOr<JobShm> StartHostPlanes(const DataPlanes& planes, const HostGroups& groups) const;
  // init()'s error when joining failed with `connect_error`: a deadline names the start
  // timeout and the controller address's variable. (When the controller is reachable, its
  // verdict naming the ranks that never arrived comes first.)
  Status StartFailure(const Status& connect_error) const;

  const Options& options_;
  const Logger logger_;
};

}  // namespace kolo
