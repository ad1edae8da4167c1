// Simulated multi-host run of the real kolorun and kolo-bench: a testbed (tools/testbed) of two
// network-namespace hosts stands in for two hosts, and `kolorun -H HOST0=ADDR:2,HOST1=ADDR:2
// --launch-cmd 'ip netns exec {host}'` (`testbed run`) runs 2 ranks in each. Checks local and
// cross ranks, that every rank's data port is bound to its namespace's address, and exact
// results. (testbed_test runs the same over a slow link.)
// Needs root (CAP_NET_ADMIN) and iproute2; exits with kSkipCode (ctest: skipped) and a message
// where namespaces cannot be made. The testbed is deleted at the end even when a check fails,
// and leftovers of killed earlier runs are deleted when it comes up.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"
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

TEST_CASE(
    "An elastic job on network-namespace hosts re-forms without the host whose rank died "
    "and grows when a host is listed",
    "[tools][kolorun][netns][elastic]") {
  Watchdog watchdog("elastic job in network namespaces", seconds(120));
  Testbed testbed("elastic", 4, 1, "10gbit", "0");
  INFO(testbed.up_error());
  REQUIRE(testbed.up_error().empty());
  // The discovery script lists hosts 0-2 of the testbed (`testbed hosts` lines), then host 3.
  const std::vector<std::string> hosts =
      SplitLines(RunProcess({TESTBED_PATH, "hosts", "--name", testbed.name()}).out);
  REQUIRE(hosts.size() == 4);
  TempDir dir;
  std::ofstream(dir.File("hosts.txt")) << hosts[0] << "\n" << hosts[1] << "\n" << hosts[2] << "\n";
  // kolorun's driver runs in host 0's namespace (`testbed run` with elastic flags).
  ChildProcess job({TESTBED_PATH,
                    "run",
                    "--name",
                    testbed.name(),
                    "-np",
                    "3",
                    "--min-np",
                    "2",
                    "--max-np",
                    "3",
                    "--host-discovery-script",
                    "cat " + dir.File("hosts.txt"),
                    "--start-timeout",
                    "30",
                    "--",
                    KOLO_ELASTIC_TRAIN_PATH,
                    "--steps",
                    "400",
                    "--step-ms",
                    "10"},
                   {std::string("KOLORUN=") + KOLORUN_PATH});
  REQUIRE(job.WaitForOutput("commit step 20 size 3", 3, seconds(60)));
  const std::regex victim_line("\\[" + testbed.Host(2) +
                               ":0\\] generation 1 rank \\d of 3 pid (\\d+)");
  std::smatch victim;
  const std::string so_far = job.StdoutSoFar();
  REQUIRE(std::regex_search(so_far, victim, victim_line));
  REQUIRE(kill(std::stoi(victim[1]), SIGKILL) == 0);
  REQUIRE(job.WaitForOutput("generation 2 rank", 2, seconds(30)));
  std::ofstream(dir.File("hosts.txt"), std::ios::app) << hosts[3] << "\n";
  REQUIRE(job.WaitForOutput("generation 3 rank", 3, seconds(60)));
  ProcessResult result = job.Wait();
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(CountOccurrences(result.out, "] done steps 400 weights") == 3);
  CHECK(result.out.find("[" + testbed.Host(0) + ":0] generation 2 rank 0 of 2") !=
        std::string::npos);
  CHECK(result.out.find("[" + testbed.Host(3) + ":0] generation 3 rank 2 of 3") !=
        std::string::npos);
}

}  // namespace
}  // namespace kolo::testing
