#include "runtime/placement.h"

#include <algorithm>

namespace kolo {

Topology ComputeTopology(const HostGroups& groups, int rank) {
  Topology topology;
  topology.local_rank = static_cast<int>(std::find(groups.local.begin(), groups.local.end(), rank) -
                                         groups.local.begin());
  topology.local_size = static_cast<int>(groups.local.size());
  topology.cross_rank = groups.host;
  topology.cross_size = static_cast<int>(groups.ranks_per_host.size());
  return topology;
}

}  // namespace kolo
