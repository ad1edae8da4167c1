// ComputeHostGroups (runtime/host_groups.h): the groups of the hierarchical allreduce from a
// peer table, for consecutive, interleaved and uneven placements.
#include "runtime/host_groups.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using kolo::ComputeHostGroups;
using kolo::HostGroups;
using kolo::PeerInfo;

namespace {

std::vector<PeerInfo> Peers(const std::vector<std::string>& hosts) {
  std::vector<PeerInfo> peers;
  for (size_t r = 0; r < hosts.size(); ++r) peers.push_back({static_cast<int>(r), hosts[r], ""});
  return peers;
}

}  // namespace

TEST_CASE("Host groups of consecutive ranks pair each local rank with its peers on other hosts",
          "[runtime][hierarchical]") {
  const std::vector<PeerInfo> peers = Peers({"a", "a", "b", "b", "c", "c"});
  const HostGroups g = ComputeHostGroups(peers, 3);
  CHECK(g.local == std::vector<int>{2, 3});
  CHECK(g.cross == std::vector<int>{1, 3, 5});
  CHECK(g.ranks_per_host == std::vector<int>{2, 2, 2});
  CHECK(g.place == std::vector<int>{0, 1, 0, 1, 0, 1});
  CHECK(g.uniform());
  CHECK(g.Describe() == "3 hosts of 2 ranks");
}

TEST_CASE("Host groups of interleaved ranks follow the host names, not the rank order",
          "[runtime][hierarchical]") {
  const std::vector<PeerInfo> peers = Peers({"b", "a", "b", "a"});
  const HostGroups g0 = ComputeHostGroups(peers, 0);
  CHECK(g0.local == std::vector<int>{0, 2});
  CHECK(g0.cross == std::vector<int>{0, 1});  // the first rank of each host
  CHECK(g0.host == 0);                        // "b" holds the lowest rank
  const HostGroups g3 = ComputeHostGroups(peers, 3);
  CHECK(g3.local == std::vector<int>{1, 3});
  CHECK(g3.cross == std::vector<int>{2, 3});
  CHECK(g3.host == 1);
  CHECK(g3.place == std::vector<int>{0, 0, 1, 1});
}

TEST_CASE("Host groups say when hosts have different numbers of ranks", "[runtime][hierarchical]") {
  const HostGroups g = ComputeHostGroups(Peers({"a", "a", "a", "b"}), 3);
  CHECK(g.local == std::vector<int>{3});
  CHECK(g.cross == std::vector<int>{0, 3});
  CHECK_FALSE(g.uniform());
  CHECK(g.Describe() == "2 hosts of 3 and 1 ranks");
  CHECK(ComputeHostGroups(Peers({"a", "b", "b", "c", "c", "c"}), 0).Describe() ==
        "3 hosts of 1, 2 and 3 ranks");
  CHECK(ComputeHostGroups(Peers({"a", "a"}), 1).Describe() == "1 host of 2 ranks");
}

TEST_CASE("A process set's host groups are its members' own, numbered in the set",
          "[runtime][hierarchical][process_sets]") {
  // Job: ranks 0, 3 on a; 1, 4 on b; 2, 5 on c. The set {1, 2, 4, 5}: b and c, interleaved.
  const HostGroups job = ComputeHostGroups(Peers({"a", "b", "c", "a", "b", "c"}), 4);
  CHECK(job.host_of == std::vector<int>{0, 1, 2, 0, 1, 2});
  const std::vector<int> members = {1, 2, 4, 5};
  const HostGroups g = kolo::SetHostGroups(job, members, 2);  // job rank 4
  CHECK(g.local == std::vector<int>{0, 2});                   // job ranks 1 and 4
  CHECK(g.cross == std::vector<int>{2, 3});                   // the second member of b and c
  CHECK(g.place == std::vector<int>{0, 0, 1, 1});
  CHECK(g.host_of == std::vector<int>{0, 1, 0, 1});  // b, the lowest member's host, first
  CHECK(g.host == 0);
  CHECK(g.Describe() == "2 hosts of 2 ranks");
  // Part of a host: {0, 3, 4} has two members on a and one on b.
  CHECK(kolo::SetHostGroups(job, {0, 3, 4}, 0).Describe() == "2 hosts of 2 and 1 ranks");
  CHECK(kolo::SetHostGroups(job, {0, 1, 2}, 1).Describe() == "3 hosts of 1 ranks");
  CHECK(kolo::SetHostGroups(job, {1, 4}, 1).Describe() == "1 host of 2 ranks");
}
