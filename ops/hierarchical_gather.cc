#include "ops/hierarchical_gather.h"

#include "ops/chain_broadcast.h"
#include "ops/ring_allgather.h"
#include "ops/shm_allgather.h"
#include "ops/shm_broadcast.h"

namespace kolo::ops {
namespace {

Status CheckPlanes(const HostPlanes& planes, const std::string& what) {
  if (planes.local == nullptr || planes.cross == nullptr || planes.rank < 0 ||
      planes.rank >= static_cast<int>(planes.place.size())) {
    return Internal(what + ": the hierarchical collectives have no host planes");
  }
  return Status::Ok();
}

}  // namespace

Status HierarchicalBroadcast(const HostPlanes& planes, void* buffer, size_t bytes, int root,
                             const std::string& what) {
  KOLO_RETURN_IF_ERROR(CheckPlanes(planes, what));
  if (root < 0 || root >= static_cast<int>(planes.place.size())) {
    return Internal(what + ": root rank " + std::to_string(root) + " is out of range");
  }
  const int root_place = planes.place[static_cast<size_t>(root)];
  if (planes.place[static_cast<size_t>(planes.rank)] == root_place) {
    // This rank's cross group is the root's: the chain starts at the root's index in it.
    int root_index = 0;
    for (int r = 0; r < root; ++r) root_index += planes.place[static_cast<size_t>(r)] == root_place;
    KOLO_RETURN_IF_ERROR(
        ChainBroadcast(*planes.cross, buffer, bytes, root_index, what + " (across hosts)"));
  }
  // On every host the rank of the root's place now holds the bytes (on the root's, the root).
  if (planes.local_shm != nullptr) {
    return ShmBroadcast(*planes.local_shm, buffer, bytes, root_place, what + " (within the host)");
  }
  return ChainBroadcast(*planes.local, buffer, bytes, root_place, what + " (within the host)");
}

Status HierarchicalAllgather(const HostPlanes& planes, void* output,
                             const std::vector<size_t>& block_bytes, const std::string& what) {
  KOLO_RETURN_IF_ERROR(CheckPlanes(planes, what));
  if (block_bytes.size() != planes.place.size()) {
    return Internal(what + ": " + std::to_string(block_bytes.size()) + " blocks for " +
                    std::to_string(planes.place.size()) + " ranks");
  }
  // Every place's blocks, in job-rank order: the members of that place's cross group in its
  // rank order.
  const int host_ranks = planes.local->size();
  std::vector<std::vector<BlockAt>> shares(static_cast<size_t>(host_ranks));  // by place
  size_t offset = 0;
  for (size_t r = 0; r < block_bytes.size(); ++r) {
    shares[static_cast<size_t>(planes.place[r])].push_back(BlockAt{offset, block_bytes[r]});
    offset += block_bytes[r];
  }
  // Across the hosts: this rank gathers the blocks of every rank with its place.
  const int my_place = planes.place[static_cast<size_t>(planes.rank)];
  KOLO_RETURN_IF_ERROR(RingAllgatherAt(*planes.cross, output, shares[static_cast<size_t>(my_place)],
                                       what + " (across hosts)"));
  // Within the host: local rank p (place p) shares the blocks of every rank with place p.
  const std::string within = what + " (within the host)";
  if (planes.local_shm != nullptr) {
    return ShmAllgatherShares(*planes.local_shm, output, shares, within);
  }
  // Over TCP, one ring per host's worth of blocks: ring k carries, from each place, the block
  // of its k-th rank.
  const size_t hosts = shares.front().size();
  std::vector<BlockAt> ring(static_cast<size_t>(host_ranks));
  for (size_t k = 0; k < hosts; ++k) {
    for (size_t place = 0; place < shares.size(); ++place) ring[place] = shares[place][k];
    KOLO_RETURN_IF_ERROR(RingAllgatherAt(*planes.local, output, ring, within));
  }
  return Status::Ok();
}

}  // namespace kolo::ops
