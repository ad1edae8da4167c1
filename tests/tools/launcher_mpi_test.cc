// Unchanged kolo programs started by the real mpirun (Open MPI) and mpiexec (MPICH/Hydra): kolo
// reads its rank, size and local rank from their variables and finds the controller on
// loopback with a port derived from the job (docs/DESIGN-NOTES.md, "Launchers"). Skipped, with
// a warning, where the launcher is not installed (tools/install-deps.sh installs both).
#include <catch2/catch.hpp>

#include "tests/support/watchdog.h"
#include "tests/tools/launcher_run.h"

namespace kolo::testing {
namespace {

using std::chrono::seconds;

// Open MPI refuses root without these; harmless otherwise.
const std::vector<std::string> kOpenMpi = {"mpirun.openmpi", "--allow-run-as-root",
                                           "--oversubscribe", "-n", "2"};
const std::vector<std::string> kMpich = {"mpiexec.mpich", "-n", "2"};

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void CheckQuickstart(const std::vector<std::string>& launcher, const std::string& name) {
  ProcessResult run = RunProcess(Concat(launcher, {QUICKSTART_PATH}), {"KOLO_LOG_LEVEL=info"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(CountOccurrences(run.out, "rank 0 of 2: grad[0] = 1\n") == 1);
  CHECK(CountOccurrences(run.out, "rank 1 of 2: grad[0] = 1\n") == 1);
  CHECK(CountOccurrences(run.err, "identity from " + name) == 2);
  CHECK(CountOccurrences(run.err, "(local 0/2") == 1);
  CHECK(CountOccurrences(run.err, "(local 1/2") == 1);
  CHECK(CountOccurrences(run.err, "controller 127.0.0.1:") >= 2);
}

void CheckBench(const std::vector<std::string>& launcher) {
  ProcessResult run =
      RunProcess(Concat(launcher, {KOLO_BENCH_PATH, "-b", "8", "-e", "64K", "-f", "8", "-n", "2",
                                   "-w", "1", "-d", "int32", "-o", "all"}));
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(CountOccurrences(run.out, "# kolo-bench:") == 1);
  CHECK(CountOccurrences(run.out, "over 2 ranks") == 1);
  CHECK(CountOccurrences(run.out, "# Wrong elements     : 0 OK") == 1);
}

}  // namespace

TEST_CASE("An unchanged kolo program runs under Open MPI's mpirun", "[tools][launchers]") {
  if (!InPath("mpirun.openmpi")) {
    WARN("SKIPPED: mpirun.openmpi is not installed (tools/install-deps.sh installs openmpi-bin)");
    return;
  }
  Watchdog watchdog("kolo under mpirun.openmpi", seconds(150));
  CheckQuickstart(kOpenMpi, "Open MPI");
  CheckBench(kOpenMpi);
}

TEST_CASE("An unchanged kolo program runs under MPICH's mpiexec", "[tools][launchers]") {
  if (!InPath("mpiexec.mpich")) {
    WARN("SKIPPED: mpiexec.mpich is not installed (tools/install-deps.sh installs mpich)");
    return;
  }
  Watchdog watchdog("kolo under mpiexec.mpich", seconds(150));
  CheckQuickstart(kMpich, "MPICH");
  CheckBench(kMpich);
}

TEST_CASE("Two mpirun jobs at once get different controller ports", "[tools][launchers]") {
  if (!InPath("mpirun.openmpi")) {
    WARN("SKIPPED: mpirun.openmpi is not installed (tools/install-deps.sh installs openmpi-bin)");
    return;
  }
  Watchdog watchdog("two concurrent mpirun jobs", seconds(150));
  ChildProcess a(Concat(kOpenMpi, {QUICKSTART_PATH}), {"KOLO_LOG_LEVEL=info"});
  ChildProcess b(Concat(kOpenMpi, {QUICKSTART_PATH}), {"KOLO_LOG_LEVEL=info"});
  ProcessResult ra = a.Wait();
  ProcessResult rb = b.Wait();
  INFO(ra.err << rb.err);
  CHECK(ra.exit_code == 0);
  CHECK(rb.exit_code == 0);
}

}  // namespace kolo::testing
