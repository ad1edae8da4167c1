// ComputeCoreShare (runtime/core_share.h): which ranks share a rank's CPUs, from the machines
// in the peer table (the testbed's namespaces, pods with CPU sets of their own, ranks bound to
// one core each, a cluster of separate kernels, partial overlaps) and by host name where a
// machine is missing; the CPU list format; and this process's own machine.
#include "runtime/core_share.h"

#include <sched.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

using kolo::ComputeCoreShare;
using kolo::CoreShare;
using kolo::PeerInfo;

namespace {

// Rank r on host hosts[r] with machine machines[r].
std::vector<PeerInfo> Peers(const std::vector<std::string>& hosts,
                            const std::vector<std::string>& machines) {
  std::vector<PeerInfo> peers;
  for (size_t r = 0; r < hosts.size(); ++r) {
    peers.push_back({static_cast<int>(r), hosts[r], "", machines[r]});
  }
  return peers;
}

std::vector<bool> Cpus(const std::string& list) {
  std::vector<bool> cpus;
  REQUIRE(kolo::ParseCpuList(list, &cpus));
  return cpus;
}

}  // namespace

TEST_CASE("CPU lists parse and print in the kernel's list format", "[runtime][cores]") {
  CHECK(kolo::FormatCpuList(Cpus("0-3,8")) == "0-3,8");
  CHECK(kolo::FormatCpuList(Cpus("5")) == "5");
  CHECK(kolo::FormatCpuList(Cpus("0,1,2,7,9-10")) == "0-2,7,9-10");
  CHECK(kolo::FormatCpuList(Cpus("")) == "");
  CHECK(Cpus("2-3") == std::vector<bool>{false, false, true, true});
  std::vector<bool> cpus;
  for (const char* bad : {"3-1", "a", "1,", ",1", "1--2", "1-", "-1", "0 1", "99999999"}) {
    INFO(bad);
    CHECK_FALSE(kolo::ParseCpuList(bad, &cpus));
  }
}

TEST_CASE("Ranks of one kernel on the same CPUs share them, whatever their host names",
          "[runtime][cores]") {
  // The testbed: 4 namespaces ("hosts") of 4 ranks on one 2-CPU machine.
  std::vector<std::string> hosts, machines;
  for (int r = 0; r < 16; ++r) {
    hosts.push_back("h" + std::to_string(r / 4));
    machines.push_back("boot-1/0-1");
  }
  const CoreShare share = ComputeCoreShare(Peers(hosts, machines), 5, 2);
  CHECK(share.ranks == 16);
  CHECK(share.cores == 2);
  CHECK(share.ranks > share.cores);
}

TEST_CASE("Pods with CPU sets of their own, and ranks bound to a core each, share nothing",
          "[runtime][cores]") {
  SECTION("4 pods of 4 ranks, each pod on 4 CPUs of one 16-CPU node") {
    std::vector<std::string> hosts, machines;
    for (int r = 0; r < 16; ++r) {
      const int pod = r / 4;
      hosts.push_back("pod" + std::to_string(pod));
      machines.push_back("boot-1/" + std::to_string(4 * pod) + "-" + std::to_string(4 * pod + 3));
    }
    const CoreShare share = ComputeCoreShare(Peers(hosts, machines), 6, 4);
    CHECK(share.ranks == 4);
    CHECK(share.cores == 4);
    CHECK_FALSE(share.ranks > share.cores);
  }
  SECTION("4 ranks of one host bound to one CPU each") {
    const CoreShare share = ComputeCoreShare(
        Peers({"a", "a", "a", "a"}, {"boot-1/0", "boot-1/1", "boot-1/2", "boot-1/3"}), 2, 1);
    CHECK(share.ranks == 1);
    CHECK(share.cores == 1);
  }
}

TEST_CASE("Separate kernels never share, and partial overlaps count their union",
          "[runtime][cores]") {
  // Two real hosts of 2 ranks, the same CPU numbers on each.
  const CoreShare cluster = ComputeCoreShare(
      Peers({"a", "a", "b", "b"}, {"boot-a/0-1", "boot-a/0-1", "boot-b/0-1", "boot-b/0-1"}), 3, 2);
  CHECK(cluster.ranks == 2);
  CHECK(cluster.cores == 2);
  // Rank 0 on 0-3 overlaps rank 1 on 2-5, not rank 2 on 6-7.
  const std::vector<PeerInfo> peers =
      Peers({"a", "a", "a"}, {"boot-1/0-3", "boot-1/2-5", "boot-1/6-7"});
  const CoreShare zero = ComputeCoreShare(peers, 0, 4);
  CHECK(zero.ranks == 2);
  CHECK(zero.cores == 6);
  const CoreShare two = ComputeCoreShare(peers, 2, 2);
  CHECK(two.ranks == 1);
  CHECK(two.cores == 2);
}

TEST_CASE("Without machines, ranks share by host name and the rank's own CPU count",
          "[runtime][cores]") {
  SECTION("nobody reports one") {
    const CoreShare share = ComputeCoreShare(Peers({"a", "a", "a", "b"}, {"", "", "", ""}), 1, 2);
    CHECK(share.ranks == 3);
    CHECK(share.cores == 2);
  }
  SECTION("one peer does not; another's is not a machine") {
    const CoreShare share = ComputeCoreShare(
        Peers({"a", "a", "b", "b"}, {"boot-1/0-1", "", "boot-1/0-1", "garbage"}), 0, 2);
    CHECK(share.ranks == 3);  // itself, rank 1 by host name, rank 2 by machine
    CHECK(share.cores == 2);
  }
  SECTION("this rank has none") {
    const CoreShare share =
        ComputeCoreShare(Peers({"a", "b", "b"}, {"", "boot-1/0-1", "boot-1/0-1"}), 0, 8);
    CHECK(share.ranks == 1);
    CHECK(share.cores == 8);
  }
}

TEST_CASE("This process's machine is the kernel's boot id and its affinity", "[runtime][cores]") {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!std::getline(file, boot_id)) {
    CHECK(kolo::LocalMachine().empty());
    return;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  const std::string machine = kolo::LocalMachine();
  REQUIRE(machine.rfind(boot_id + "/", 0) == 0);
  const std::vector<bool> cpus = Cpus(machine.substr(boot_id.size() + 1));
  int count = 0;
  for (size_t cpu = 0; cpu < cpus.size(); ++cpu) {
    CHECK(static_cast<bool>(CPU_ISSET(cpu, &set)) == cpus[cpu]);
    count += cpus[cpu];
  }
  CHECK(count == CPU_COUNT(&set));
}
