// The runtime's start (init()): RuntimeImpl::Create and Start, which take the steps in their
// order and hand each part to the room that owns it, and the steps themselves (RuntimeStart,
// runtime/runtime_start.h), each of which fails with its own message. What rank 0 does after a
// start that failed is ControlPlane::TellLateRanks.
#include "runtime/runtime_start.h"

#include <sched.h>

#include <algorithm>
#include <utility>

#include "controller/controller.h"
#include "core/config/config_table.h"
#include "core/hierarchy_rule.h"
#include "core/op_text.h"
#include "ops/cpu_executor.h"
#include "runtime/elastic_join.h"
#include "runtime/fd_limit.h"
#include "runtime/job_credentials.h"
#include "runtime/local_address.h"
#include "runtime/runtime_impl.h"
#include "transport/deadline.h"
#include "transport/grpc/grpc_control_server.h"
#include "transport/shm/shm_mesh.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo {
namespace {

using SteadyTime = std::chrono::steady_clock;

// The caller's wait (BackgroundLoop::Drive) on cores the ranks sharing them outnumber
// (runtime/core_share.h: on this host, or on this machine's kernel under other host names):
// long enough for a small op to finish while its caller drives it, which takes longer the more
// ranks share the cores. Measured on 2 cores (docs/PERFORMANCE.md, "Waiting on
// oversubscribed cores"): the best budgets were ~300 us at 4 and 8 ranks (1.2 ms was slower at
// 8), 1.6-3 ms at 16, ~5 ms at 32 and ~10 ms at 64, where anything shorter gained little.
constexpr std::chrono::microseconds kOversubscribedWaitSpinFew{300};      // up to 8 ranks
constexpr std::chrono::microseconds kOversubscribedWaitSpinPerRank{150};  // beyond
constexpr std::chrono::microseconds kMaxWaitSpin{10000};  // KOLO_WAIT_SPIN_US's own limit

std::chrono::microseconds CallerWaitSpin(std::chrono::microseconds asked, bool core_each,
                                         int sharing_ranks) {
  if (core_each || asked <= std::chrono::microseconds::zero()) return asked;
  if (sharing_ranks <= 8) return kOversubscribedWaitSpinFew;
  return std::min(kMaxWaitSpin, kOversubscribedWaitSpinPerRank * sharing_ranks);
}

// One info line: where this rank stands, and which paths its ops take.
void LogReady(const Logger& logger, const Options& options, const Topology& topology,
              const std::string& controller_address, const std::string& allreduce_path,
              const std::string& gpu_path) {
  logger->info(
      "rank {} of {} ready (local {}/{}, cross {}/{}), controller {}{}; identity from {}; "
      "allreduce over {}; GPU tensors over {}",
      options.rank, options.size, topology.local_rank, topology.local_size, topology.cross_rank,
      topology.cross_size, controller_address,
      options.controller_source.empty() ? "" : " (" + options.controller_source + ")",
      options.identity_source.empty() ? "no launcher variables" : options.identity_source,
      allreduce_path, gpu_path);
}

}  // namespace

StatusOr<std::unique_ptr<RuntimeImpl>> RuntimeImpl::Create(const Options& options) {
  KOLO_RETURN_IF_ERROR(options.Validate());
  StatusOr<spdlog::level::level_enum> level = ParseLogLevel(options.log_level);
  if (!level.ok()) return level.status().WithContext("KOLO_LOG_LEVEL");
  std::unique_ptr<RuntimeImpl> impl(new RuntimeImpl(options, *level));
  Status started = impl->Start();
  if (!started.ok()) {
    impl->control_.TellLateRanks(impl->options_, impl->logger_);
    impl->Teardown();
    std::string where =
        options.controller_source.empty()
            ? ""
            : ", controller " + options.controller_address + " (" + options.controller_source + ")";
    return started.WithContext("init() of rank " + std::to_string(options.rank) + " of " +
                               std::to_string(options.size) + where);
  }
  return impl;
}

// The start, one named step after another; each step's failure says what failed (Create adds
// the rank and the controller address, and tears down what the steps before built).
Status RuntimeImpl::Start() {
  // KOLO_TIMELINE: the trace file, open from the start. "DYNAMIC" is Horovod's "off until
  // start_timeline()" (HOROVOD_TIMELINE=DYNAMIC), not a file.
  if (!options_.timeline_path.empty() && options_.timeline_path != "DYNAMIC") {
    KOLO_RETURN_IF_ERROR(timeline_.Start(options_.timeline_path).WithContext("KOLO_TIMELINE"));
  }
  for (const std::string& warning : options_.environment_warnings) logger_->warn("{}", warning);
  const RuntimeStart start(options_, logger_);
  KOLO_ASSIGN_OR_RETURN(transport::ControlSecurity security, start.LoadSecurity());
  control_.UseSecurity(std::move(security));
  start.RaiseFdLimit();
  std::string controller_address = options_.controller_address;
  if (options_.rank == 0) {
    KOLO_ASSIGN_OR_RETURN(
        ControllerParts controller,
        start.StartController(control_.security(), &timeline_, &controller_address));
    control_.Adopt(std::move(controller));
  }
  {
    // An elastic generation's rank 0 gives up on its start as soon as kolorun's driver says a
    // member is gone (docs/ELASTIC.md), not at the start timeout.
    std::unique_ptr<internal::ElasticStartWatch> watch;
    if (control_.controller() != nullptr && !options_.elastic_rendezvous.empty()) {
      watch = std::make_unique<internal::ElasticStartWatch>(
          [this](const std::string& lost, int lost_rank) {
            control_.NoteLostRank(lost, lost_rank);
          });
    }
    KOLO_RETURN_IF_ERROR(JoinJob(start, controller_address));
  }
  Executor* executor = planes_.StartExecutor(placement_.host_groups, control_.autotuner());
  KOLO_RETURN_IF_ERROR(
      planes_.StartP2p(placement_.host_groups, &timeline_).WithContext("point-to-point lane"));
  KOLO_ASSIGN_OR_RETURN(gpu_, start.StartGpu(executor, planes_.mesh(), placement_.topology));
  StartLoop();
  LogReady(logger_, options_, placement_.topology, controller_address, planes_.Describe(),
           gpu_->path_name());
  return Status::Ok();
}

// The rendezvous through the controller, then the data connections to every peer and the
// shared-memory plane.
Status RuntimeImpl::JoinJob(const RuntimeStart& start, const std::string& controller_address) {
  // At the start timeout the controller gives up and tells the ranks already connected which
  // ranks never arrived; every rank waits a little longer than that for the verdict.
  const double grace = std::min(2.0, options_.start_timeout_seconds);
  const SteadyTime::time_point deadline =
      transport::AddSeconds(SteadyTime::now(), options_.start_timeout_seconds + grace);
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<transport::TcpMesh> mesh,
                        start.ListenForPeers(controller_address, control_.security()));
  planes_.AdoptMesh(std::move(mesh));
  const RelayPlan relay = PlanControlRelay(options_, controller_address);
  if (!relay.direct_reason.empty()) logger_->warn("{}", relay.direct_reason);
  if (relay.hosts_relay) {
    KOLO_ASSIGN_OR_RETURN(std::unique_ptr<transport::ControlRelay> started,
                          StartHostRelay(options_, relay, controller_address, control_.security(),
                                         deadline, logger_));
    control_.AdoptRelay(std::move(started));
  }
  // An abort must reach a background thread blocked in the ring at once, not at the ring's
  // deadline.
  ControlChannel* channel =
      control_.OpenChannel(controller_address, relay, options_, logger_,
                           [this](const Status& why) { planes_.Interrupt(why); });
  KOLO_ASSIGN_OR_RETURN(
      const RuntimeStart::Meeting meeting,
      start.MeetPeers(*channel, *planes_.mesh(), control_.security(), deadline, &wakeup_));
  placement_ = meeting.placement;
  // Before connecting: a rank that fails here leaves, and a peer still connecting would
  // report that as a lost rank instead of this reason (every rank sees the same peer table).
  if (options_.transport != Transport::kShm || placement_.topology.local_size == options_.size) {
    KOLO_RETURN_IF_ERROR(
        start.ConnectPeers(*planes_.mesh(), channel->generation(), meeting, deadline));
  }
  KOLO_ASSIGN_OR_RETURN(JobShm shm, start.StartSharedMemory(planes_, placement_));
  planes_.AdoptShm(std::move(shm));
  return Status::Ok();
}

void RuntimeImpl::StartLoop() {
  BackgroundLoop::Wiring loop_wiring;
  loop_wiring.on_clock_offset = [this](double offset_us, double rtt_us) {
    timeline_.SetClockOffset(offset_us, rtt_us);
  };
  const bool busy_poll = planes_.mesh()->busy_poll();
  // On oversubscribed cores too, as the caller's wait (with its own budget there), unlike the
  // shared-memory plane's spin, which stays off there (docs/PERFORMANCE.md).
  loop_wiring.spin_for_rounds = true;
  loop_wiring.between_polls = busy_poll ? BetweenPolls::kKeepCore : BetweenPolls::kYield;
  wait_spin_ = CallerWaitSpin(std::chrono::microseconds(options_.wait_spin_us), busy_poll,
                              placement_.core_share.ranks);
  if (options_.rank == 0) loop_wiring.negotiation_sink = &timeline_;
  loop_wiring.process_sets = &sets_;
  loop_wiring.autotuner = control_.autotuner();
  loop_wiring.set_executor = [this](int id) { return planes_.SetExecutor(id, sets_); };
  loop_wiring.set_removed = [this](int id) { planes_.DropSet(id); };
  RoundLane* lane = planes_.StartRoundLane();
  loop_ = std::make_unique<BackgroundLoop>(options_, std::move(loop_wiring), &queue_, &wakeup_,
                                           control_.channel(), gpu_.get(), planes_.mesh(), &tracer_,
                                           logger_, lane);
  loop_->Start();
}

RuntimeStart::RuntimeStart(const Options& options, Logger logger)
    : options_(options), logger_(std::move(logger)) {}

StatusOr<transport::ControlSecurity> RuntimeStart::LoadSecurity() const {
  transport::ControlSecurity security;
  KOLO_ASSIGN_OR_RETURN(security.credentials, LoadJobCredentials(options_));
  security.tls_cert = options_.tls_cert;
  security.tls_key = options_.tls_key;
  security.tls_ca = options_.tls_ca;
  if (!options_.controller_address.empty()) {
    std::string host;
    int port = 0;
    KOLO_RETURN_IF_ERROR(
        SplitHostPort(options_.controller_address, "KOLO_CONTROLLER", &host, &port));
    KOLO_RETURN_IF_ERROR(CheckUnauthenticatedJob(
        options_, security.credentials, !IsLoopbackHost(host),
        "the controller address " + options_.controller_address + " is not a loopback address"));
  }
  if (security.credentials.key.empty() && options_.size > 1) {  // one rank has no peers to admit
    logger_->warn(
        "no job secret (KOLO_SECRET): this single-host job's ports are not authenticated; any "
        "local process could join it. kolorun makes a secret");
  }
  return security;
}

void RuntimeStart::RaiseFdLimit() const {
  const FdLimitChange fds = RaiseFdLimitToHard();
  if (!fds.error.empty()) {
    logger_->debug("file descriptor limit stays at {}: {}", fds.before, fds.error);
  } else if (fds.after != fds.before) {
    logger_->debug("raised the file descriptor limit from {} to the hard limit {}", fds.before,
                   fds.after);
  }
}

StatusOr<ControllerParts> RuntimeStart::StartController(const transport::ControlSecurity& security,
                                                        TraceSink* timeline,
                                                        std::string* controller_address) const {
  // A one-rank job needs no fixed port: the controller takes any free loopback port.
  if (controller_address->empty()) *controller_address = "127.0.0.1:0";
  std::string host;
  int port = 0;
  KOLO_RETURN_IF_ERROR(SplitHostPort(*controller_address, "KOLO_CONTROLLER", &host, &port));
  ControllerParts parts;
  parts.controller = std::make_unique<controller::Controller>(
      options_, timeline, SteadyClock::Get(),
      MakeLogger(options_.rank, "controller", logger_->level()));
  if (options_.autotune) {
    Autotuner::Config tuning;
    tuning.threshold_bytes = options_.fusion_threshold_bytes;
    tuning.cycle_ms = options_.cycle_time_ms;
    tuning.warmup_samples = options_.autotune_warmup_samples;
    tuning.steps_per_sample = options_.autotune_steps_per_sample;
    tuning.samples_per_setting = options_.autotune_samples;
    tuning.log_path = options_.autotune_log;
    tuning.logger = MakeLogger(options_.rank, "autotune", logger_->level());
    parts.autotuner = std::make_unique<Autotuner>(std::move(tuning));
    parts.controller->UseAutotuner(parts.autotuner.get());
  }
  StatusOr<std::unique_ptr<transport::GrpcControlServer>> server =
      transport::GrpcControlServer::Start(
          *controller_address, parts.controller.get(), options_.timeout_seconds,
          MakeLogger(options_.rank, "control-server", logger_->level()), security, options_.size);
  if (!server.ok()) return server.status().WithContext("starting the controller");
  parts.server = std::move(server).value();
  parts.started = SteadyTime::now();
  parts.channel = std::make_unique<LocalControlChannel>(
      options_.rank, parts.controller.get(), parts.server.get(), parts.server->generation());
  parts.controller->Attach(parts.channel.get());
  parts.controller->Start();
  *controller_address = host + ":" + std::to_string(parts.server->port());
  return parts;
}

StatusOr<std::unique_ptr<transport::TcpMesh>> RuntimeStart::ListenForPeers(
    const std::string& controller_address, const transport::ControlSecurity& security) const {
  std::string controller_host;
  int controller_port = 0;
  KOLO_RETURN_IF_ERROR(
      SplitHostPort(controller_address, "KOLO_CONTROLLER", &controller_host, &controller_port));
  std::string data_host = options_.data_address;
  if (data_host.empty()) {
    KOLO_ASSIGN_OR_RETURN(data_host, LocalAddressRouting(controller_host));
  }
  transport::TcpMesh::Config mesh_config;
  mesh_config.rank = options_.rank;
  mesh_config.size = options_.size;
  mesh_config.bind_host = data_host;
  mesh_config.auth.credentials = security.credentials;
  mesh_config.timeout_seconds = options_.timeout_seconds;
  mesh_config.logger = MakeLogger(options_.rank, "data-plane", logger_->level());
  mesh_config.round_lane = options_.fast_path;
  mesh_config.p2p_lane = P2pConnects(options_);
  mesh_config.transport = options_.transport;
  StatusOr<std::unique_ptr<transport::TcpMesh>> mesh = transport::TcpMesh::Listen(mesh_config);
  if (!mesh.ok()) return mesh.status().WithContext("data-plane listener on " + data_host);
  return mesh;
}

StatusOr<RuntimeStart::Meeting> RuntimeStart::MeetPeers(ControlChannel& channel,
                                                        const transport::TcpMesh& mesh,
                                                        const transport::ControlSecurity& security,
                                                        SteadyTime::time_point deadline,
                                                        Wakeup* wakeup) const {
  Hello hello;
  hello.rank = options_.rank;
  hello.size = options_.size;
  hello.host = options_.host.empty() ? LocalHostName() : options_.host;
  hello.data_address = mesh.listen_address();
  hello.machine = LocalMachine();
  StatusOr<std::vector<PeerInfo>> peers =
      channel.Connect(hello, deadline, [wakeup] { wakeup->Notify(); });
  if (!peers.ok()) return StartFailure(peers.status());
  Meeting meeting;
  meeting.peers = std::move(peers).value();
  Placement& placement = meeting.placement;
  placement.host_groups = ComputeHostGroups(meeting.peers, options_.rank);
  Topology& topology = placement.topology;
  topology = ComputeTopology(placement.host_groups, options_.rank);
  KOLO_RETURN_IF_ERROR(CheckUnauthenticatedJob(
      options_, security.credentials, topology.cross_size > 1,
      "its ranks report " + std::to_string(topology.cross_size) + " host names"));
  if (options_.local_rank >= 0) topology.local_rank = options_.local_rank;
  if (options_.local_size >= 0) topology.local_size = options_.local_size;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  placement.own_cpus = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  CoreShare& share = placement.core_share;
  share = ComputeCoreShare(meeting.peers, options_.rank, placement.own_cpus);
  share.ranks = std::max(share.ranks, topology.local_size);
  logger_->debug("{} ranks (this host's {}) share this rank's {} cores ({})", share.ranks,
                 topology.local_size, share.cores,
                 hello.machine.empty() ? "by host name" : hello.machine);
  return meeting;
}

Status RuntimeStart::ConnectPeers(transport::TcpMesh& mesh, const std::string& generation,
                                  const Meeting& meeting, SteadyTime::time_point deadline) const {
  mesh.SetGeneration(generation);
  std::vector<std::string> addresses;
  for (const PeerInfo& peer : meeting.peers) addresses.push_back(peer.data_address);
  KOLO_RETURN_IF_ERROR(mesh.Connect(addresses, deadline));
  // Busy polling by this host's ranks on this rank's CPUs, not by the machine's share: at twice
  // as many ranks as cores (2 hosts of 2 ranks on 2 cores, the testbed) polling still paid for
  // small ops (docs/PERFORMANCE.md, "Waiting on oversubscribed cores").
  mesh.SetCoreShare(meeting.placement.topology.local_size, meeting.placement.own_cpus,
                    options_.cpu_bind == "core");
  return Status::Ok();
}

StatusOr<JobShm> RuntimeStart::StartSharedMemory(const DataPlanes& planes,
                                                 const Placement& placement) const {
  const int local_size = placement.topology.local_size;
  const bool one_host = local_size == options_.size;
  if (options_.transport == Transport::kShm && !one_host) {
    return FailedPrecondition(
        "KOLO_TRANSPORT=shm needs every rank on one host, but this host has " +
        std::to_string(local_size) + " of the " + std::to_string(options_.size) +
        " ranks; multi-host jobs use tcp (KOLO_TRANSPORT=auto or tcp)");
  }
  const bool use_shm = options_.transport == Transport::kShm ||
                       (options_.transport == Transport::kAuto && one_host && options_.size > 1);
  if (!use_shm) return StartHostPlanes(planes, placement.host_groups);
  transport::TcpMesh& mesh = *planes.mesh();
  StatusOr<std::unique_ptr<transport::ShmMesh>> shm =
      transport::ShmMesh::Create(planes.ShmConfig(mesh, options_.shm_single_copy, {}), mesh);
  if (!shm.ok()) {
    return shm.status().WithContext(std::string("KOLO_TRANSPORT=") +
                                    TransportName(options_.transport));
  }
  JobShm parts;
  parts.shm = std::move(shm).value();
  return parts;
}

StatusOr<JobShm> RuntimeStart::StartHostPlanes(const DataPlanes& planes,
                                               const HostGroups& groups) const {
  JobShm parts;
  if (options_.hierarchical == Hierarchical::kOff) return parts;
  const int hosts = static_cast<int>(groups.ranks_per_host.size());
  const bool asked = options_.hierarchical == Hierarchical::kOn;
  const char* mode = asked ? "on" : "auto";
  if (!groups.hierarchical()) {
    // Only hosts with different numbers of ranks defeat an explicit "on"; say so louder then.
    const bool uneven = hosts > 1 && options_.size != hosts;
    logger_->log(
        asked && uneven ? spdlog::level::warn : spdlog::level::debug,
        "KOLO_HIERARCHICAL={}: allreduces run flat over all {} ranks: {}{}", mode, options_.size,
        groups.Describe(),
        uneven ? ", and a hierarchical allreduce needs the same number on every host" : "");
    return parts;
  }
  transport::TcpMesh& mesh = *planes.mesh();
  parts.host_plane = std::make_unique<SubsetDataPlane>(mesh, groups.local);
  parts.cross_plane = std::make_unique<SubsetDataPlane>(mesh, groups.cross);
  if (options_.transport == Transport::kAuto) {
    // The probe would name the plane's ranks, not the job's; the slots serve the host's steps.
    StatusOr<std::unique_ptr<transport::ShmMesh>> shm = transport::ShmMesh::Create(
        planes.ShmConfig(*parts.host_plane, ShmSingleCopy::kOff, groups.local), *parts.host_plane);
    if (!shm.ok()) {
      return shm.status().WithContext(std::string("KOLO_HIERARCHICAL=") + mode +
                                      " (KOLO_TRANSPORT=tcp keeps the host's steps on TCP)");
    }
    parts.host_shm = std::move(shm).value();
  }
  logger_->debug(
      "KOLO_HIERARCHICAL={}: allreduces of {} bytes and more run hierarchically over {}: "
      "within the host ({}) among ranks {}, across hosts among ranks {}",
      mode, ConfiguredHierarchyMinBytes(options_.hierarchical), groups.Describe(),
      parts.host_shm ? "shared memory" : "tcp", RankList(groups.local), RankList(groups.cross));
  return parts;
}

StatusOr<std::unique_ptr<GpuPlane>> RuntimeStart::StartGpu(Executor* executor,
                                                           transport::TcpMesh* mesh,
                                                           const Topology& topology) const {
  GpuPlane::Wiring gpu_wiring;
  gpu_wiring.local_rank = topology.local_rank;
  std::string data_host;
  int data_port = 0;
  if (SplitHostPort(mesh->listen_address(), "the data address", &data_host, &data_port).ok()) {
    StatusOr<std::string> interface = InterfaceOfAddress(data_host);
    if (interface.ok()) gpu_wiring.network_interface = *interface;  // else NCCL picks its own
  }
  return GpuPlane::Create(options_, std::move(gpu_wiring), executor, mesh,
                          MakeLogger(options_.rank, "gpu", logger_->level()));
}

Status RuntimeStart::StartFailure(const Status& connect_error) const {
  if (connect_error.code() != StatusCode::kDeadlineExceeded) return connect_error;
  return Status(connect_error.code(),
                connect_error.message() +
                    " (KOLO_START_TIMEOUT_SECONDS=" + SecondsText(options_.start_timeout_seconds) +
                    "; is rank 0 running, and is KOLO_CONTROLLER, or the launcher's rule, right?)");
}

}  // namespace kolo
