#include "runtime/host_groups.h"

#include <algorithm>
#include <map>
#include <string>

namespace kolo {

bool HostGroups::uniform() const {
  return std::all_of(ranks_per_host.begin(), ranks_per_host.end(),
                     [this](int n) { return n == ranks_per_host.front(); });
}

bool HostGroups::hierarchical() const {
  return ranks_per_host.size() > 1 && place.size() > ranks_per_host.size() && uniform();
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

namespace {

// The groups of `rank` among ranks whose hosts are `keys` (equal keys: one host).
template <typename Key>
HostGroups GroupByHost(const std::vector<Key>& keys, int rank) {
  HostGroups groups;
  std::map<Key, int> host_index;  // key -> host, numbered by lowest rank
  groups.place.resize(keys.size());
  groups.host_of.resize(keys.size());
  for (size_t r = 0; r < keys.size(); ++r) {
    auto [it, added] = host_index.emplace(keys[r], static_cast<int>(groups.ranks_per_host.size()));
    if (added) groups.ranks_per_host.push_back(0);
    groups.host_of[r] = it->second;
    groups.place[r] = groups.ranks_per_host[static_cast<size_t>(it->second)]++;
  }
  const size_t mine = static_cast<size_t>(rank);
  groups.host = groups.host_of[mine];
  for (size_t r = 0; r < keys.size(); ++r) {
    if (groups.host_of[r] == groups.host) groups.local.push_back(static_cast<int>(r));
    if (groups.place[r] == groups.place[mine]) groups.cross.push_back(static_cast<int>(r));
  }
  return groups;
}

}  // namespace

HostGroups ComputeHostGroups(const std::vector<PeerInfo>& peers, int rank) {
  std::vector<std::string> hosts;
  hosts.reserve(peers.size());
  for (const PeerInfo& peer : peers) hosts.push_back(peer.host);
  return GroupByHost(hosts, rank);
}

HostGroups SetHostGroups(const HostGroups& job, const std::vector<int>& members, int index) {
  std::vector<int> hosts;
  hosts.reserve(members.size());
  for (int member : members) hosts.push_back(job.host_of[static_cast<size_t>(member)]);
  return GroupByHost(hosts, index);
}

}  // namespace kolo
