// Rank placement over a host list; see rank_placement.h.
#include "launcher/rank_placement.h"

#include <algorithm>
#include <string>

namespace kolo::launcher {

StatusOr<std::vector<RankPlacement>> PlaceRanks(const std::vector<Host>& hosts, int num_ranks) {
  const int total = TotalSlots(hosts);
  if (hosts.empty()) return InvalidArgument("the host list is empty");
  if (num_ranks == 0) num_ranks = total;
  if (num_ranks > total) {
    return InvalidArgument("-np " + std::to_string(num_ranks) + " needs " +
                           std::to_string(num_ranks) + " slots, but the " +
                           std::to_string(hosts.size()) + " host(s) have only " +
                           std::to_string(total) + " (kolorun does not oversubscribe)");
  }
  std::vector<RankPlacement> placements;
  placements.reserve(static_cast<size_t>(num_ranks));
  int rank = 0;
  for (int h = 0; h < static_cast<int>(hosts.size()) && rank < num_ranks; ++h) {
    const int here = std::min(hosts[static_cast<size_t>(h)].slots, num_ranks - rank);
    for (int local = 0; local < here; ++local) {
      placements.push_back(RankPlacement{rank++, h, local, here, h});
    }
  }
  return placements;
}

}  // namespace kolo::launcher
