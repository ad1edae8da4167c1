// DataPlanes' job-wide part (runtime/data_planes.h); the process sets' is set_planes.cc.
#include "runtime/data_planes.h"

#include "core/hierarchy_rule.h"
#include "ops/cpu_executor.h"
#include "transport/p2p/p2p_lane.h"
#include "transport/shm/shm_round_lane.h"
#include "transport/tcp/tcp_mesh.h"
#include "transport/tcp/tcp_round_lane.h"

namespace kolo {

DataPlanes::DataPlanes(const Options& options, Logger logger)
    : options_(options), logger_(std::move(logger)) {}

DataPlanes::~DataPlanes() = default;

void DataPlanes::AdoptMesh(std::unique_ptr<transport::TcpMesh> mesh) {
  mesh_ = std::move(mesh);
}

transport::ShmMesh::Config DataPlanes::ShmConfig(const DataPlane& plane, ShmSingleCopy single_copy,
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

void DataPlanes::AdoptShm(JobShm shm) {
  shm_ = std::move(shm.shm);
  host_plane_ = std::move(shm.host_plane);
  cross_plane_ = std::move(shm.cross_plane);
  host_shm_ = std::move(shm.host_shm);
  shm_plane_.store(shm_ ? shm_.get() : host_shm_.get());
}

ops::CpuExecutor* DataPlanes::StartExecutor(const HostGroups& groups, Autotuner* autotuner) {
  host_groups_ = groups;
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
    if (autotuner != nullptr && options_.hierarchical == Hierarchical::kAuto) {
      autotuner->TuneHierarchy(kHierarchicalAutoMinBytes);
    }
  }
  return executor_.get();
}

RoundLane* DataPlanes::StartRoundLane() {
  if (!options_.fast_path) return nullptr;
  Logger lane_logger = MakeLogger(options_.rank, "fast-path", logger_->level());
  if (shm_) {  // round messages through the segment, the connections as doorbells
    round_lane_ = std::make_unique<transport::ShmRoundLane>(
        options_.rank, mesh_->TakeRoundConnections(), shm_->round_area(), lane_logger);
  } else {
    round_lane_ = std::make_unique<transport::TcpRoundLane>(
        options_.rank, mesh_->TakeRoundConnections(), lane_logger);
  }
  return round_lane_.get();
}

bool P2pConnects(const Options& options) {
  if (options.size < 2 || options.p2p == "off") return false;
  return options.p2p == "on" || options.size <= kP2pAutoMaxRanks;
}

Status DataPlanes::StartP2p(const HostGroups& groups, TraceSink* trace) {
  if (!P2pConnects(options_)) return Status::Ok();
  transport::P2pLane::Config config;
  config.rank = options_.rank;
  config.size = options_.size;
  config.same_host.assign(options_.size, false);
  for (int rank : groups.local) config.same_host[rank] = true;
  config.single_copy =
      options_.transport != Transport::kTcp && options_.shm_single_copy != ShmSingleCopy::kOff;
  config.rings = options_.transport != Transport::kTcp;
  config.start_timeout_seconds = options_.start_timeout_seconds;
  config.logger = MakeLogger(options_.rank, "p2p", logger_->level());
  config.trace = trace;
  config.between_polls = mesh_->busy_poll() ? BetweenPolls::kKeepCore : BetweenPolls::kYield;
  KOLO_ASSIGN_OR_RETURN(p2p_owned_,
                        transport::P2pLane::Start(std::move(config), mesh_->TakeP2pConnections()));
  p2p_.store(p2p_owned_.get());
  MutexLock lock(&set_shms_mu_);  // an Interrupt that did not see the lane has set fatal_
  if (!fatal_.ok()) p2p_owned_->Interrupt(fatal_);
  return Status::Ok();
}

std::string DataPlanes::Describe() const {
  if (shm_) return "shared memory";
  if (!host_plane_) return "tcp";
  return "tcp, hierarchical over " + host_groups_.Describe() +
         (host_shm_ ? " with shared memory within each host" : "");
}

void DataPlanes::Interrupt(const Status& why) {
  mesh_->Interrupt(why);
  if (SharedMemoryPlane* shm = shm_plane_.load()) shm->Interrupt(why);
  MutexLock lock(&set_shms_mu_);
  if (fatal_.ok()) fatal_ = why;
  for (SharedMemoryPlane* shm : set_shms_) shm->Interrupt(why);
  // After fatal_ is set: a lane StartP2p publishes meanwhile reads it there.
  if (transport::P2pLane* lane = p2p_.load()) lane->Interrupt(why);
}

void DataPlanes::DropRoundLane() {
  round_lane_.reset();
}

void DataPlanes::StopP2p() {
  if (p2p_owned_) {
    p2p_owned_->Stop(ShutdownError("kolo was shut down before this point-to-point op completed"));
  }
}

void DataPlanes::DropExecutors() {
  executor_.reset();
  while (!set_planes_.empty()) DropSet(set_planes_.begin()->first);  // before mesh_
}

void DataPlanes::Reset() {
  cross_plane_.reset();
  shm_plane_.store(nullptr);
  host_shm_.reset();
  host_plane_.reset();  // after host_shm_, which it bootstrapped
  shm_.reset();
  mesh_.reset();
}

}  // namespace kolo
