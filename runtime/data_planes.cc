// DataPlanes' job-wide part (runtime/data_planes.h); the process sets' is set_planes.cc.
#include "runtime/data_planes.h"

#include "core/hierarchy_rule.h"
#include "ops/cpu_executor.h"
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
}

void DataPlanes::DropRoundLane() {
  round_lane_.reset();
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
