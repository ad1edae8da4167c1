#include "runtime/host_groups.h"

#include <algorithm>
#include <map>

namespace kolo {

bool HostGroups::uniform() const {
  return std::all_of(ranks_per_host.begin(), ranks_per_host.end(),
                     [this](int n) { return n == ranks_per_host.front(); });
}

std::string HostGroups::Describe() const {
  const size_t hosts = ranks_per_host.size();
  std::string text = std::to_string(hosts) + (hosts == 1 ? " host of " : " hosts of ");
  if (uniform() && hosts > 0) return text + std::to_string(ranks_per_host.front()) + " ranks";
  for (size_t i = 0; i < hosts; ++i) {
    text += (i == 0 ? "" : i + 1 == hosts ? " and " : ", ") + std::to_string(ranks_per_host[i]);
  }
  return text + " ranks";
}

HostGroups ComputeHostGroups(const std::vector<PeerInfo>& peers, int rank) {
  HostGroups groups;
  std::map<std::string, int> host_index;  // host -> index by lowest rank
  std::vector<int>& place = groups.place;
  place.resize(peers.size());
  for (size_t r = 0; r < peers.size(); ++r) {
    auto [it, added] =
        host_index.emplace(peers[r].host, static_cast<int>(groups.ranks_per_host.size()));
    if (added) groups.ranks_per_host.push_back(0);
    place[r] = groups.ranks_per_host[static_cast<size_t>(it->second)]++;
  }
  const std::string& mine = peers[static_cast<size_t>(rank)].host;
  groups.host = host_index[mine];
  for (size_t r = 0; r < peers.size(); ++r) {
    if (peers[r].host == mine) groups.local.push_back(static_cast<int>(r));
    if (place[r] == place[static_cast<size_t>(rank)]) groups.cross.push_back(static_cast<int>(r));
  }
  return groups;
}

}  // namespace kolo
