// RuntimeImpl's start (init()), step by step: Create, Start and its named steps, each of which
// fails with its own message, and what rank 0 does after a start that failed (TellLateRanks).
// The rest of RuntimeImpl is in runtime_impl.cc.
#include <sched.h>

#include <algorithm>
#include <thread>
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
#include "transport/grpc/grpc_control_channel.h"
#include "transport/grpc/grpc_control_server.h"
#include "transport/shm/shm_mesh.h"
#include "transport/shm/shm_round_lane.h"
#include "transport/tcp/tcp_mesh.h"
#include "transport/tcp/tcp_round_lane.h"

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

}  // namespace

StatusOr<std::unique_ptr<RuntimeImpl>> RuntimeImpl::Create(const Options& options) {
  KOLO_RETURN_IF_ERROR(options.Validate());
  StatusOr<spdlog::level::level_enum> level = ParseLogLevel(options.log_level);
  if (!level.ok()) return level.status().WithContext("KOLO_LOG_LEVEL");
  std::unique_ptr<RuntimeImpl> impl(new RuntimeImpl(options, *level));
  Status started = impl->Start();
  if (!started.ok()) {
    impl->TellLateRanks();
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
  KOLO_RETURN_IF_ERROR(OpenTimeline());
  for (const std::string& warning : options_.environment_warnings) logger_->warn("{}", warning);
  KOLO_RETURN_IF_ERROR(LoadSecurity());
  RaiseFdLimit();
  std::string controller_address = options_.controller_address;
  if (options_.rank == 0) KOLO_RETURN_IF_ERROR(StartController(&controller_address));
  {
    // An elastic generation's rank 0 gives up on its start as soon as kolorun's driver says a
    // member is gone (docs/ELASTIC.md), not at the start timeout.
    std::unique_ptr<internal::ElasticStartWatch> watch;
    if (controller_ && !options_.elastic_rendezvous.empty()) {
      watch = std::make_unique<internal::ElasticStartWatch>([this](const std::string& lost,
                                                                   int lost_rank) {
        elastic_lost_rank_.store(lost_rank);
        controller_->AbortStart("the elastic generation lost a member while it started: " + lost +
                                " (kolorun's elastic driver)");
      });
    }
    KOLO_RETURN_IF_ERROR(JoinJob(controller_address));
  }
  KOLO_RETURN_IF_ERROR(StartExecutors());
  StartLoop();
  LogReady(controller_address);
  return Status::Ok();
}

Status RuntimeImpl::OpenTimeline() {
  // "DYNAMIC" is Horovod's "off until start_timeline()" (HOROVOD_TIMELINE=DYNAMIC), not a file.
  if (options_.timeline_path.empty() || options_.timeline_path == "DYNAMIC") return Status::Ok();
  return timeline_.Start(options_.timeline_path).WithContext("KOLO_TIMELINE");
}

Status RuntimeImpl::LoadSecurity() {
  KOLO_ASSIGN_OR_RETURN(security_.credentials, LoadJobCredentials(options_));
  security_.tls_cert = options_.tls_cert;
  security_.tls_key = options_.tls_key;
  security_.tls_ca = options_.tls_ca;
  if (!options_.controller_address.empty()) {
    std::string host;
    int port = 0;
    KOLO_RETURN_IF_ERROR(
        SplitHostPort(options_.controller_address, "KOLO_CONTROLLER", &host, &port));
    KOLO_RETURN_IF_ERROR(CheckUnauthenticatedJob(
        options_, security_.credentials, !IsLoopbackHost(host),
        "the controller address " + options_.controller_address + " is not a loopback address"));
  }
  if (security_.credentials.key.empty() && options_.size > 1) {  // one rank has no peers to admit
    logger_->warn(
        "no job secret (KOLO_SECRET): this single-host job's ports are not authenticated; any "
        "local process could join it. kolorun makes a secret");
  }
  return Status::Ok();
}

void RuntimeImpl::RaiseFdLimit() {
  const FdLimitChange fds = RaiseFdLimitToHard();
  if (!fds.error.empty()) {
    logger_->debug("file descriptor limit stays at {}: {}", fds.before, fds.error);
  } else if (fds.after != fds.before) {
    logger_->debug("raised the file descriptor limit from {} to the hard limit {}", fds.before,
                   fds.after);
  }
}

Status RuntimeImpl::StartController(std::string* controller_address) {
  // A one-rank job needs no fixed port: the controller takes any free loopback port.
  if (controller_address->empty()) *controller_address = "127.0.0.1:0";
  std::string host;
  int port = 0;
  KOLO_RETURN_IF_ERROR(SplitHostPort(*controller_address, "KOLO_CONTROLLER", &host, &port));
  controller_ = std::make_unique<controller::Controller>(
      options_, &timeline_, SteadyClock::Get(),
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
    autotuner_ = std::make_unique<Autotuner>(std::move(tuning));
    controller_->UseAutotuner(autotuner_.get());
  }
  StatusOr<std::unique_ptr<transport::GrpcControlServer>> server =
      transport::GrpcControlServer::Start(
          *controller_address, controller_.get(), options_.timeout_seconds,
          MakeLogger(options_.rank, "control-server", logger_->level()), security_, options_.size);
  if (!server.ok()) return server.status().WithContext("starting the controller");
  server_ = std::move(server).value();
  controller_started_ = SteadyTime::now();
  local_channel_ = std::make_unique<LocalControlChannel>(options_.rank, controller_.get(),
                                                         server_.get(), server_->generation());
  controller_->Attach(local_channel_.get());
  controller_->Start();
  *controller_address = host + ":" + std::to_string(server_->port());
  return Status::Ok();
}

Status RuntimeImpl::JoinJob(const std::string& controller_address) {
  // At the start timeout the controller gives up and tells the ranks already connected which
  // ranks never arrived; every rank waits a little longer than that for the verdict.
  const double grace = std::min(2.0, options_.start_timeout_seconds);
  const SteadyTime::time_point deadline =
      transport::AddSeconds(SteadyTime::now(), options_.start_timeout_seconds + grace);
  KOLO_RETURN_IF_ERROR(ListenForPeers(controller_address));
  OpenControlChannel(controller_address);
  KOLO_ASSIGN_OR_RETURN(const std::vector<PeerInfo> peers, MeetPeers(deadline));
  // Before connecting: a rank that fails here leaves, and a peer still connecting would
  // report that as a lost rank instead of this reason (every rank sees the same peer table).
  if (options_.transport == Transport::kShm && topology_.local_size != options_.size) {
    return StartSharedMemory();
  }
  KOLO_RETURN_IF_ERROR(ConnectPeers(peers, deadline));
  return StartSharedMemory();
}

Status RuntimeImpl::ListenForPeers(const std::string& controller_address) {
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
  mesh_config.auth.credentials = security_.credentials;
  mesh_config.timeout_seconds = options_.timeout_seconds;
  mesh_config.logger = MakeLogger(options_.rank, "data-plane", logger_->level());
  mesh_config.round_lane = options_.fast_path;
  mesh_config.transport = options_.transport;
  StatusOr<std::unique_ptr<transport::TcpMesh>> mesh = transport::TcpMesh::Listen(mesh_config);
  if (!mesh.ok()) return mesh.status().WithContext("data-plane listener on " + data_host);
  mesh_ = std::move(mesh).value();
  return Status::Ok();
}

void RuntimeImpl::OpenControlChannel(const std::string& controller_address) {
  if (local_channel_) {
    channel_ = local_channel_.get();
  } else {
    grpc_channel_ = transport::GrpcControlChannel::Create(
        controller_address, options_.timeout_seconds,
        MakeLogger(options_.rank, "control", logger_->level()), security_);
    channel_ = grpc_channel_.get();
  }
  // An abort must reach a background thread blocked in the ring at once, not at the ring's
  // deadline.
  channel_->SetFatalHandler([this](const Status& why) {
    mesh_->Interrupt(why);
    if (SharedMemoryPlane* shm = shm_plane_.load()) shm->Interrupt(why);
    MutexLock lock(&set_shms_mu_);
    if (fatal_.ok()) fatal_ = why;
    for (SharedMemoryPlane* shm : set_shms_) shm->Interrupt(why);
  });
}

StatusOr<std::vector<PeerInfo>> RuntimeImpl::MeetPeers(SteadyTime::time_point deadline) {
  Hello hello;
  hello.rank = options_.rank;
  hello.size = options_.size;
  hello.host = options_.host.empty() ? LocalHostName() : options_.host;
  hello.data_address = mesh_->listen_address();
  hello.machine = LocalMachine();
  StatusOr<std::vector<PeerInfo>> peers =
      channel_->Connect(hello, deadline, [this] { wakeup_.Notify(); });
  if (!peers.ok()) return StartFailure(peers.status());
  host_groups_ = ComputeHostGroups(*peers, options_.rank);
  topology_ = ComputeTopology(host_groups_, options_.rank);
  KOLO_RETURN_IF_ERROR(CheckUnauthenticatedJob(
      options_, security_.credentials, topology_.cross_size > 1,
      "its ranks report " + std::to_string(topology_.cross_size) + " host names"));
  if (options_.local_rank >= 0) topology_.local_rank = options_.local_rank;
  if (options_.local_size >= 0) topology_.local_size = options_.local_size;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  own_cpus_ = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  core_share_ = ComputeCoreShare(*peers, options_.rank, own_cpus_);
  core_share_.ranks = std::max(core_share_.ranks, topology_.local_size);
  logger_->debug("{} ranks (this host's {}) share this rank's {} cores ({})", core_share_.ranks,
                 topology_.local_size, core_share_.cores,
                 hello.machine.empty() ? "by host name" : hello.machine);
  return peers;
}

Status RuntimeImpl::ConnectPeers(const std::vector<PeerInfo>& peers,
                                 SteadyTime::time_point deadline) {
  mesh_->SetGeneration(channel_->generation());
  std::vector<std::string> addresses;
  for (const PeerInfo& peer : peers) addresses.push_back(peer.data_address);
  KOLO_RETURN_IF_ERROR(mesh_->Connect(addresses, deadline));
  // Busy polling by this host's ranks on this rank's CPUs, not by the machine's share: at twice
  // as many ranks as cores (2 hosts of 2 ranks on 2 cores, the testbed) polling still paid for
  // small ops (docs/PERFORMANCE.md, "Waiting on oversubscribed cores").
  mesh_->SetCoreShare(topology_.local_size, own_cpus_, options_.cpu_bind == "core");
  return Status::Ok();
}

Status RuntimeImpl::StartSharedMemory() {
  const bool one_host = topology_.local_size == options_.size;
  if (options_.transport == Transport::kShm && !one_host) {
    return FailedPrecondition(
        "KOLO_TRANSPORT=shm needs every rank on one host, but this host has " +
        std::to_string(topology_.local_size) + " of the " + std::to_string(options_.size) +
        " ranks; multi-host jobs use tcp (KOLO_TRANSPORT=auto or tcp)");
  }
  const bool use_shm = options_.transport == Transport::kShm ||
                       (options_.transport == Transport::kAuto && one_host && options_.size > 1);
  if (!use_shm) return StartHostPlanes();
  StatusOr<std::unique_ptr<transport::ShmMesh>> shm =
      transport::ShmMesh::Create(ShmConfig(*mesh_, options_.shm_single_copy, {}), *mesh_);
  if (!shm.ok()) {
    return shm.status().WithContext(std::string("KOLO_TRANSPORT=") +
                                    TransportName(options_.transport));
  }
  shm_ = std::move(shm).value();
  shm_plane_.store(shm_.get());
  return Status::Ok();
}

transport::ShmMesh::Config RuntimeImpl::ShmConfig(const DataPlane& plane, ShmSingleCopy single_copy,
                                                  std::vector<int> job_ranks) const {
  transport::ShmMesh::Config config;
  config.rank = plane.rank();
  config.size = plane.size();
  config.timeout_seconds = options_.timeout_seconds;
  config.spin = mesh_->busy_poll();  // decided by SetCoreShare, KOLO_CPU_BIND included
  config.poll_budget = std::chrono::microseconds(options_.wait_spin_us);
  config.single_copy = single_copy;
  config.logger = MakeLogger(options_.rank, "shm", logger_->level());
  config.job_ranks = std::move(job_ranks);
  return config;
}

Status RuntimeImpl::StartFailure(const Status& connect_error) {
  if (connect_error.code() != StatusCode::kDeadlineExceeded) return connect_error;
  return Status(connect_error.code(),
                connect_error.message() +
                    " (KOLO_START_TIMEOUT_SECONDS=" + SecondsText(options_.start_timeout_seconds) +
                    "; is rank 0 running, and is KOLO_CONTROLLER, or the launcher's rule, right?)");
}

Status RuntimeImpl::StartExecutors() {
  executor_ =
      std::make_unique<ops::CpuExecutor>(*mesh_, MakeLogger(options_.rank, "ops", logger_->level()),
                                         ops::RingScratch::kDefaultBytes, shm_.get());
  if (host_plane_) {
    ops::HostPlanes planes;
    planes.local = host_plane_.get();
    planes.cross = cross_plane_.get();
    planes.local_shm = host_shm_.get();
    planes.place = host_groups_.place;
    planes.rank = mesh_->rank();
    // Broadcasts only when asked: measured, the two steps gain with many ranks a host and lose
    // where the link is the limit (docs/SCALE.md, "Hierarchical collectives").
    executor_->UseHierarchy(std::move(planes), ConfiguredHierarchyMinBytes(options_.hierarchical),
                            options_.hierarchical == Hierarchical::kOn);
    // The choice is tuned only where KOLO_HIERARCHICAL left it to kolo (auto).
    if (autotuner_ && options_.hierarchical == Hierarchical::kAuto) {
      autotuner_->TuneHierarchy(kHierarchicalAutoMinBytes);
    }
  }
  GpuPlane::Wiring gpu_wiring;
  gpu_wiring.local_rank = topology_.local_rank;
  std::string data_host;
  int data_port = 0;
  if (SplitHostPort(mesh_->listen_address(), "the data address", &data_host, &data_port).ok()) {
    StatusOr<std::string> interface = InterfaceOfAddress(data_host);
    if (interface.ok()) gpu_wiring.network_interface = *interface;  // else NCCL picks its own
  }
  KOLO_ASSIGN_OR_RETURN(
      gpu_, GpuPlane::Create(options_, std::move(gpu_wiring), executor_.get(), mesh_.get(),
                             MakeLogger(options_.rank, "gpu", logger_->level())));
  return Status::Ok();
}

Status RuntimeImpl::StartHostPlanes() {
  if (options_.hierarchical == Hierarchical::kOff) return Status::Ok();
  const int hosts = static_cast<int>(host_groups_.ranks_per_host.size());
  const bool asked = options_.hierarchical == Hierarchical::kOn;
  const char* mode = asked ? "on" : "auto";
  if (!host_groups_.hierarchical()) {
    // Only hosts with different numbers of ranks defeat an explicit "on"; say so louder then.
    const bool uneven = hosts > 1 && options_.size != hosts;
    logger_->log(
        asked && uneven ? spdlog::level::warn : spdlog::level::debug,
        "KOLO_HIERARCHICAL={}: allreduces run flat over all {} ranks: {}{}", mode, options_.size,
        host_groups_.Describe(),
        uneven ? ", and a hierarchical allreduce needs the same number on every host" : "");
    return Status::Ok();
  }
  host_plane_ = std::make_unique<SubsetDataPlane>(*mesh_, host_groups_.local);
  cross_plane_ = std::make_unique<SubsetDataPlane>(*mesh_, host_groups_.cross);
  if (options_.transport == Transport::kAuto) {
    // The probe would name the plane's ranks, not the job's; the slots serve the host's steps.
    StatusOr<std::unique_ptr<transport::ShmMesh>> shm = transport::ShmMesh::Create(
        ShmConfig(*host_plane_, ShmSingleCopy::kOff, host_groups_.local), *host_plane_);
    if (!shm.ok()) {
      return shm.status().WithContext(std::string("KOLO_HIERARCHICAL=") + mode +
                                      " (KOLO_TRANSPORT=tcp keeps the host's steps on TCP)");
    }
    host_shm_ = std::move(shm).value();
    shm_plane_.store(host_shm_.get());
  }
  logger_->debug(
      "KOLO_HIERARCHICAL={}: allreduces of {} bytes and more run hierarchically over {}: "
      "within the host ({}) among ranks {}, across hosts among ranks {}",
      mode, ConfiguredHierarchyMinBytes(options_.hierarchical), host_groups_.Describe(),
      host_shm_ ? "shared memory" : "tcp", RankList(host_groups_.local),
      RankList(host_groups_.cross));
  return Status::Ok();
}

void RuntimeImpl::StartLoop() {
  BackgroundLoop::Wiring loop_wiring;
  loop_wiring.on_clock_offset = [this](double offset_us, double rtt_us) {
    timeline_.SetClockOffset(offset_us, rtt_us);
  };
  // On oversubscribed cores too, as the caller's wait (with its own budget there), unlike the
  // shared-memory plane's spin, which stays off there (docs/PERFORMANCE.md).
  loop_wiring.spin_for_rounds = true;
  loop_wiring.between_polls = mesh_->busy_poll() ? BetweenPolls::kKeepCore : BetweenPolls::kYield;
  wait_spin_ = CallerWaitSpin(std::chrono::microseconds(options_.wait_spin_us), mesh_->busy_poll(),
                              core_share_.ranks);
  if (options_.rank == 0) loop_wiring.negotiation_sink = &timeline_;
  loop_wiring.process_sets = &sets_;
  loop_wiring.autotuner = autotuner_.get();
  loop_wiring.set_executor = [this](int id) { return SetExecutor(id); };
  loop_wiring.set_removed = [this](int id) { DropSetPlane(id); };
  if (options_.fast_path) {
    Logger lane_logger = MakeLogger(options_.rank, "fast-path", logger_->level());
    if (shm_) {  // round messages through the segment, the connections as doorbells
      round_lane_ = std::make_unique<transport::ShmRoundLane>(
          options_.rank, mesh_->TakeRoundConnections(), shm_->round_area(), lane_logger);
    } else {
      round_lane_ = std::make_unique<transport::TcpRoundLane>(
          options_.rank, mesh_->TakeRoundConnections(), lane_logger);
    }
  }
  loop_ = std::make_unique<BackgroundLoop>(options_, std::move(loop_wiring), &queue_, &wakeup_,
                                           channel_, gpu_.get(), mesh_.get(), &tracer_, logger_,
                                           round_lane_.get());
  loop_->Start();
}

void RuntimeImpl::LogReady(const std::string& controller_address) const {
  logger_->info(
      "rank {} of {} ready (local {}/{}, cross {}/{}), controller {}{}; identity from {}; "
      "allreduce over {}; GPU tensors over {}",
      options_.rank, options_.size, topology_.local_rank, topology_.local_size,
      topology_.cross_rank, topology_.cross_size, controller_address,
      options_.controller_source.empty() ? "" : " (" + options_.controller_source + ")",
      options_.identity_source.empty() ? "no launcher variables" : options_.identity_source,
      shm_          ? "shared memory"
      : host_plane_ ? "tcp, hierarchical over " + host_groups_.Describe() +
                          (host_shm_ ? " with shared memory within each host" : "")
                    : "tcp",
      gpu_->path_name());
}

void RuntimeImpl::TellLateRanks() {
  if (!controller_ || !server_ || options_.start_timeout_seconds <= 0) return;
  // In an elastic job, the member kolorun's driver reported lost will never connect.
  auto not_told = [this] {
    std::vector<int> ranks = controller_->RanksNotTold();
    const int lost = elastic_lost_rank_.load();
    ranks.erase(std::remove(ranks.begin(), ranks.end(), lost), ranks.end());
    return ranks;
  };
  std::vector<int> untold = not_told();
  if (untold.empty()) return;
  SteadyTime::time_point deadline =
      controller_started_ + std::chrono::duration_cast<SteadyTime::duration>(
                                std::chrono::duration<double>(options_.start_timeout_seconds));
  if (!options_.elastic_rendezvous.empty()) {
    // In an elastic job the late rank is most likely the lost member itself (every live member
    // was waiting for the generation and connects within milliseconds); one that is only late
    // fails at its own start deadline and joins the next generation.
    deadline = std::min(deadline, SteadyTime::now() + std::chrono::seconds(2));
  }
  const std::string ranks = RankList(untold);
  logger_->info(
      "the start was aborted; rank{} {} {} not connected yet: the controller stays up to tell "
      "{} why, at most until the start timeout (KOLO_START_TIMEOUT_SECONDS={})",
      untold.size() == 1 ? "" : "s", ranks, untold.size() == 1 ? "has" : "have",
      untold.size() == 1 ? "it" : "them", SecondsText(options_.start_timeout_seconds));
  while (!untold.empty() && SteadyTime::now() < deadline) {
    // Polls a rare error path at a coarse step; the deadline bounds it.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    untold = not_told();
  }
}

}  // namespace kolo
