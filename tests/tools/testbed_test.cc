// The multi-host testbed (tools/testbed/testbed) end to end: 2 hosts x 2 ranks on links shaped
// to 200 Mbit/s (and 1 ms where the kernel has netem); a kolo-bench allreduce through `testbed
// run` (the real kolorun) with exact results and a bus bandwidth below the link rate, which
// shows the shaping applies; Open MPI's launch through `testbed mpirun`, and one Open MPI
// allreduce where the peers' benchmark source and mpicxx (tools/testbed/build-mpi-bench)
// exist; and after `down` no namespace of the testbed is left. Needs root; skipped (77) where
// namespaces cannot be made.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/watchdog.h"
#include "tests/tools/testbed_fixture.h"

namespace kolo::testing {
namespace {

using std::chrono::seconds;

constexpr double kLinkGBps = 200e6 / 8 / 1e9;  // 200 Mbit/s in kolo-bench's GB/s

TEST_CASE("a 2 x 2 testbed runs kolo and Open MPI over shaped links and leaves nothing behind",
          "[tools][testbed][netns][multirank]") {
  Watchdog watchdog("testbed 2 hosts x 2 ranks", seconds(120));
  std::vector<std::string> namespaces;
  {
    Testbed testbed("ctest", 2, 2, "200mbit", "1ms");
    INFO(testbed.up_error());
    REQUIRE(testbed.up_error().empty());
    WARN(testbed.shaping());
    CHECK(testbed.Namespaces().size() == 3);  // the switch and two hosts
    ProcessResult qdiscs =
        RunProcess({"ip", "netns", "exec", testbed.Host(1), "tc", "qdisc", "show", "dev", "eth0"});
    CHECK_THAT(qdiscs.out, Catch::Contains("rate 200Mbit"));

    ProcessResult run =
        testbed.RunBench({"--start-timeout", "30"}, {"-b", "2M", "-e", "2M", "-n", "3", "-w", "1"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Catch::Contains("# Wrong elements     : 0 OK"));
    // Bus bandwidth over the 2 hosts (bytes / time · 2(2−1)/2): every element of one host's
    // sum has to cross the other's link, so no algorithm, flat or hierarchical, gets it above
    // the link rate unless the shaping does not apply.
    const double busbw = LastBusBandwidth(run.out, 2);
    INFO("busbw over hosts " << busbw << " GB/s, link " << kLinkGBps << " GB/s");
    CHECK(busbw > 0);
    CHECK(busbw < kLinkGBps);

    if (access("/usr/bin/mpirun", X_OK) != 0) {
      WARN("no /usr/bin/mpirun: the Open MPI run is left out");
    } else {
      // Each rank on its host: mpirun's daemons entered the namespaces, which carry their
      // names as host names.
      ProcessResult hosts = testbed.MpiRun({"hostname"});
      INFO(hosts.out << hosts.err);
      CHECK(hosts.exit_code == 0);
      CHECK(CountOccurrences(hosts.out, testbed.Host(0) + "\n") == 2);
      CHECK(CountOccurrences(hosts.out, testbed.Host(1) + "\n") == 2);

      ProcessResult built = RunProcess({BUILD_MPI_BENCH_PATH, TESTBED_BUILD_DIR});
      if (built.exit_code == 3) {
        WARN("no Open MPI benchmark to run: " << built.err);
      } else {
        INFO(built.err);
        REQUIRE(built.exit_code == 0);
        const std::string bench = SplitLines(built.out).at(0);
        ProcessResult mpi = testbed.MpiRun({bench, "-s", "4096,65536", "-n", "3", "-w", "1"});
        INFO(mpi.out << mpi.err);
        CHECK(mpi.exit_code == 0);
        CHECK_THAT(mpi.out, Catch::Contains("nranks: 4"));
        CHECK_THAT(mpi.out, Catch::Contains("# RESULT: all values correct"));
      }
    }
    ProcessResult down = testbed.Down();
    INFO(down.err);
    CHECK(down.exit_code == 0);
    namespaces = testbed.Namespaces();
  }
  CHECK(namespaces.empty());
}

TEST_CASE("a testbed whose owner was killed is deleted by the next down of any testbed",
          "[tools][testbed][netns]") {
  Watchdog watchdog("testbed stale cleanup", seconds(60));
  ChildProcess owner({"sleep", "60"});
  const std::string name = "stale" + std::to_string(getpid());
  ProcessResult up =
      RunProcess({TESTBED_PATH, "up", "--name", name, "--owner", std::to_string(owner.pid()),
                  "--hosts", "1", "--ranks-per-host", "1", "--rate", "1gbit", "--delay", "0"});
  SkipIfNoNamespaces(up);
  INFO(up.err);
  REQUIRE(up.exit_code == 0);
  CHECK(Testbed::NamespacesOf(name).size() == 2);  // the switch and one host

  owner.Signal(SIGKILL);
  owner.Wait();
  ProcessResult status = RunProcess({TESTBED_PATH, "status", "--name", name});
  CHECK(status.exit_code == 1);
  CHECK_THAT(status.err, Catch::Contains("is stale: its owner pid"));

  ProcessResult down = RunProcess({TESTBED_PATH, "down", "--name", "other" + name});
  INFO(down.err);
  CHECK(down.exit_code == 0);
  CHECK(Testbed::NamespacesOf(name).empty());
  ProcessResult after = RunProcess({TESTBED_PATH, "status", "--name", name});
  CHECK_THAT(after.err, Catch::Contains("no testbed named"));
}

}  // namespace
}  // namespace kolo::testing
