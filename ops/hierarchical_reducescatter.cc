#include "ops/hierarchical_reducescatter.h"

#include <algorithm>
#include <cstdint>

#include "ops/ring_reducescatter.h"
#include "ops/shm_reducescatter.h"

namespace kolo::ops {

std::vector<int> PlaceMajorOrder(const HostPlanes& planes) {
  std::vector<int> order(planes.place.size());
  for (size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int>(r);
  std::stable_sort(order.begin(), order.end(), [&planes](int a, int b) {
    return planes.place[static_cast<size_t>(a)] < planes.place[static_cast<size_t>(b)];
  });
  return order;
}

Status HierarchicalReducescatter(const HostPlanes& planes, void* buffer,
                                 const std::vector<size_t>& block_elements, DataType dtype,
                                 ReduceOp op, RingScratch& scratch, const std::string& what) {
  if (planes.local == nullptr || planes.cross == nullptr || planes.rank < 0 ||
      planes.rank >= static_cast<int>(planes.place.size())) {
    return Internal(what + ": the hierarchical collectives have no host planes");
  }
  if (block_elements.size() != planes.place.size()) {
    return Internal(what + ": " + std::to_string(block_elements.size()) + " blocks for " +
                    std::to_string(planes.place.size()) + " ranks");
  }
  const int my_place = planes.place[static_cast<size_t>(planes.rank)];
  // Place p's share: the blocks of the ranks with place p (one per host), together in the
  // buffer; this rank's place's blocks in the cross plane's rank order.
  std::vector<size_t> share_elements(static_cast<size_t>(planes.local->size()), 0);
  std::vector<size_t> mine;
  size_t share_offset = 0;                            // elements before this rank's place's share
  for (size_t r = 0; r < planes.place.size(); ++r) {  // job order: the cross plane's for `mine`
    const int place = planes.place[r];
    if (place < 0 || place >= planes.local->size()) {
      return Internal(what + ": rank " + std::to_string(r) + " has place " + std::to_string(place) +
                      " on a host of " + std::to_string(planes.local->size()) + " ranks");
    }
    share_elements[static_cast<size_t>(place)] += block_elements[r];
    if (place < my_place) share_offset += block_elements[r];
    if (place == my_place) mine.push_back(block_elements[r]);
  }
  // Within the host: local rank p ends with place p's share reduced over the host.
  uint8_t* const data = static_cast<uint8_t*>(buffer);
  uint8_t* const share = data + share_offset * DataTypeSize(dtype);
  const std::string within = what + " (within the host)";
  if (planes.local_shm != nullptr) {
    KOLO_RETURN_IF_ERROR(
        ShmReducescatter(*planes.local_shm, data, share, share_elements, dtype, op, within));
  } else {
    KOLO_RETURN_IF_ERROR(
        RingReducescatterBlocks(*planes.local, data, share_elements, dtype, op, scratch, within));
  }
  // Across the hosts: the ranks of this place reduce-scatter its share, one block each.
  return RingReducescatterBlocks(*planes.cross, share, mine, dtype, op, scratch,
                                 what + " (across hosts)");
}

}  // namespace kolo::ops
