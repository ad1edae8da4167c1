// Simulated multi-host run of the real kolorun and kolo-bench: a testbed (tools/testbed) of two
// network-namespace hosts stands in for two hosts, and `kolorun -H HOST0=ADDR:2,HOST1=ADDR:2
// --launch-cmd 'ip netns exec {host}'` (`testbed run`) runs 2 ranks in each. Checks local and
// cross ranks, that every rank's data port is bound to its namespace's address, and exact
// results. (testbed_test runs the same over a slow link.)
// Needs root (CAP_NET_ADMIN) and iproute2; exits with kSkipCode (ctest: skipped) and a message
// where namespaces cannot be made. The testbed is deleted at the end even when a check fails,
// and leftovers of killed earlier runs are deleted when it comes up.
#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/watchdog.h"
#include "tests/tools/testbed_fixture.h"

namespace kolo::testing {
namespace {

using std::chrono::seconds;

TEST_CASE("kolorun runs 2 hosts x 2 ranks in network namespaces with local and cross ranks",
          "[tools][kolorun][netns][multirank]") {
  Watchdog watchdog("kolorun in network namespaces", seconds(120));
  Testbed testbed("netns", 2, 2, "10gbit", "0");
  INFO(testbed.up_error());
  REQUIRE(testbed.up_error().empty());

  ProcessResult run =
      testbed.RunBench({"--start-timeout", "60"}, {"-b", "1M", "-e", "1M", "-n", "3", "-w", "1"},
                       {"KOLO_LOG_LEVEL=debug"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("# Wrong elements     : 0 OK"));
  const std::regex ready(R"(\[(\d)\] .*rank (\d) of 4 ready \(local (\d)/2, cross (\d)/2\), )"
                         R"(controller ([\d.]+):\d+)");
  const std::regex listening(R"(\[(\d)\] .*data mesh listening on ([\d.]+):\d+)");
  std::set<int> ready_ranks, bound_ranks;
  for (const std::string& line : SplitLines(run.err)) {
    std::smatch m;
    if (std::regex_search(line, m, ready)) {
      int rank = std::stoi(m[1]);
      INFO(line);
      CHECK(std::stoi(m[2]) == rank);
      CHECK(std::stoi(m[3]) == rank % 2);
      CHECK(std::stoi(m[4]) == rank / 2);
      CHECK(m[5] == Testbed::Address(0));
      ready_ranks.insert(rank);
    } else if (std::regex_search(line, m, listening)) {
      int rank = std::stoi(m[1]);
      INFO(line);
      CHECK(m[2] == Testbed::Address(rank / 2));
      bound_ranks.insert(rank);
    }
  }
  CHECK(ready_ranks == std::set<int>{0, 1, 2, 3});
  CHECK(bound_ranks == std::set<int>{0, 1, 2, 3});
}

}  // namespace
}  // namespace kolo::testing
