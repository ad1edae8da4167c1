// DataPlanes' process-set part (runtime/data_planes.h: SetExecutor, StartSetHierarchy,
// MakeSetShm, DropSet): each set's executor over its members, with the set's own shared memory
// on one host or its own hierarchy across hosts. Loop thread only, as declared there.
#include <algorithm>

#include "core/hierarchy_rule.h"
#include "core/op_text.h"
#include "ops/cpu_executor.h"
#include "ops/hierarchical_gather.h"
#include "runtime/data_planes.h"
#include "transport/shm/shm_mesh.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo {

Executor* DataPlanes::SetExecutor(int id, const ProcessSets& sets) {
  auto it = set_planes_.find(id);
  if (it != set_planes_.end()) return it->second.executor.get();
  std::vector<int> ranks = sets.Members(id);
  if (ranks.empty()) return nullptr;
  SetPlane set;
  set.plane = std::make_unique<SubsetDataPlane>(*mesh_, ranks);
  const HostGroups groups = SetHostGroups(host_groups_, ranks, set.plane->rank());
  const bool one_host = groups.ranks_per_host.size() == 1;
  if (one_host)
    set.shm = MakeSetShm(id, *set.plane, ranks, options_.shm_single_copy, /*part=*/false);
  set.executor = std::make_unique<ops::CpuExecutor>(
      *set.plane, MakeLogger(options_.rank, "ops", logger_->level()),
      ops::RingScratch::kDefaultBytes, set.shm.get());
  if (!one_host) StartSetHierarchy(id, ranks, groups, &set);
  Executor* executor = set.executor.get();
  set_planes_.emplace(id, std::move(set));
  return executor;
}

void DataPlanes::StartSetHierarchy(int id, const std::vector<int>& members,
                                   const HostGroups& groups, SetPlane* set) {
  if (options_.hierarchical == Hierarchical::kOff) return;
  const bool asked = options_.hierarchical == Hierarchical::kOn;
  const char* mode = asked ? "on" : "auto";
  if (!groups.hierarchical()) {
    const bool uneven = !groups.uniform();
    // One warning for the set (its first member's), not one from every member.
    logger_->log(
        asked && uneven && set->plane->rank() == 0 ? spdlog::level::warn : spdlog::level::debug,
        "KOLO_HIERARCHICAL={}: process set {} runs flat over its {} ranks: {}{}", mode, id,
        members.size(), groups.Describe(),
        uneven ? ", and a hierarchical allreduce needs the same number on every host" : "");
    return;
  }
  auto job_ranks = [&members](const std::vector<int>& indices) {
    std::vector<int> ranks;
    for (int index : indices) ranks.push_back(members[static_cast<size_t>(index)]);
    return ranks;
  };
  const std::vector<int> local = job_ranks(groups.local);
  set->host_plane = std::make_unique<SubsetDataPlane>(*mesh_, local);
  set->cross_plane = std::make_unique<SubsetDataPlane>(*mesh_, job_ranks(groups.cross));
  // As the job's host planes: the probe would name the plane's ranks, not the set's.
  set->host_shm = MakeSetShm(id, *set->host_plane, local, ShmSingleCopy::kOff, /*part=*/true);
  ops::HostPlanes planes;
  planes.local = set->host_plane.get();
  planes.cross = set->cross_plane.get();
  planes.local_shm = set->host_shm.get();
  planes.place = groups.place;
  planes.rank = set->plane->rank();
  set->executor->UseHierarchy(std::move(planes), ConfiguredHierarchyMinBytes(options_.hierarchical),
                              asked);
  logger_->debug(
      "KOLO_HIERARCHICAL={}: process set {}'s allreduces of {} bytes and more run "
      "hierarchically over {}: within the host ({}) among ranks {}, across hosts among ranks {}",
      mode, id, ConfiguredHierarchyMinBytes(options_.hierarchical), groups.Describe(),
      set->host_shm ? "shared memory" : "tcp", RankList(local), RankList(job_ranks(groups.cross)));
}

std::unique_ptr<transport::ShmMesh> DataPlanes::MakeSetShm(int id, SubsetDataPlane& plane,
                                                           const std::vector<int>& job_ranks,
                                                           ShmSingleCopy single_copy, bool part) {
  if (job_ranks.size() < 2 || options_.transport == Transport::kTcp) return nullptr;
  StatusOr<std::unique_ptr<transport::ShmMesh>> shm =
      transport::ShmMesh::Create(ShmConfig(plane, single_copy, job_ranks), plane);
  if (!shm.ok()) {
    logger_->warn("process set {} runs over TCP{}: {}", id, part ? " within this host" : "",
                  shm.status().message());
    return nullptr;
  }
  MutexLock lock(&set_shms_mu_);
  set_shms_.push_back(shm->get());
  if (!fatal_.ok()) (*shm)->Interrupt(fatal_);
  return std::move(shm).value();
}

void DataPlanes::DropSet(int id) {
  auto it = set_planes_.find(id);
  if (it == set_planes_.end()) return;
  {
    MutexLock lock(&set_shms_mu_);
    for (SharedMemoryPlane* shm : {static_cast<SharedMemoryPlane*>(it->second.shm.get()),
                                   static_cast<SharedMemoryPlane*>(it->second.host_shm.get())}) {
      if (shm == nullptr) continue;
      set_shms_.erase(std::remove(set_shms_.begin(), set_shms_.end(), shm), set_shms_.end());
    }
  }
  set_planes_.erase(it);
}

}  // namespace kolo
