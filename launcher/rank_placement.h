// PlaceRanks: which host each rank of a multi-host job runs on, and its local and cross rank.
// Ranks fill the hosts in the order given: the first host's slots first. A pure function for
// kolorun's main thread and for tests.
#pragma once

#include <vector>

#include "kolo/status.h"
#include "launcher/host_list.h"

namespace kolo::launcher {

struct RankPlacement {
  int rank = 0;
  int host_index = 0;  // into the host list
  int local_rank = 0;  // index among the ranks on that host
  int local_size = 1;  // ranks on that host
  int cross_rank = 0;  // index of the host among the hosts that run ranks
};

// Places `num_ranks` ranks (0: one per slot) on `hosts`. Fails with kInvalidArgument when the
// hosts have fewer slots than ranks (kolorun does not oversubscribe). Hosts past the last rank
// get none and do not count in cross ranks.
StatusOr<std::vector<RankPlacement>> PlaceRanks(const std::vector<Host>& hosts, int num_ranks);

}  // namespace kolo::launcher
