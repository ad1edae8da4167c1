// An unchanged kolo program started by hand with the variables torchrun and srun set (neither
// tool runs here): 2 processes on this host read their identity from them, find the controller,
// and compute the right result; a controller port that is taken fails fast with a message.
#include "core/config/launcher_env.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <ctime>

#include "tests/support/watchdog.h"
#include "tests/tools/launcher_run.h"

namespace kolo::testing {
namespace {

using std::chrono::seconds;

void CheckTwoRanks(const std::vector<ProcessResult>& runs, const std::string& source) {
  REQUIRE(runs.size() == 2);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << runs[r].out << runs[r].err);
    CHECK(runs[r].exit_code == 0);
    CHECK(runs[r].out == "rank " + std::to_string(r) + " of 2: grad[0] = 1\n");
    CHECK(CountOccurrences(runs[r].err, "identity from " + source) == 1);
  }
}

// A SLURM job id whose derived controller port is free right now.
std::string JobIdWithFreePort() {
  for (long id = (static_cast<long>(getpid()) * 7919 + std::time(nullptr)) % 1000000;; ++id) {
    PortHolder probe(DerivedControllerPort("slurm:" + std::to_string(id) + ".0"));
    if (probe.port() != 0) return std::to_string(id);
  }
}

std::vector<std::string> SrunEnv(int rank, const std::string& job_id) {
  return {"SLURM_PROCID=" + std::to_string(rank),
          "SLURM_NTASKS=2",
          "SLURM_LOCALID=" + std::to_string(rank),
          "SLURM_NODEID=0",
          "SLURM_JOB_ID=" + job_id,
          "SLURM_STEP_ID=0",
          "SLURM_JOB_NODELIST=127.0.0.1,node[2-3]",
          "KOLO_LOG_LEVEL=info"};
}

}  // namespace

TEST_CASE("An unchanged kolo program runs with torchrun's variables", "[tools][launchers]") {
  Watchdog watchdog("kolo with torchrun variables", seconds(90));
  const std::string port = std::to_string(FreeLoopbackPort());
  std::vector<std::vector<std::string>> envs;
  for (int r = 0; r < 2; ++r) {
    envs.push_back({"RANK=" + std::to_string(r), "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
                    "MASTER_PORT=" + port, "KOLO_LOG_LEVEL=info"});
  }
  std::vector<ProcessResult> runs = RunRanks({QUICKSTART_PATH}, envs);
  CheckTwoRanks(runs, "torchrun");
  // No LOCAL_RANK: local rank and size come from the host names exchanged at init.
  CHECK(CountOccurrences(runs[1].err, "(local 1/2") == 1);
}

TEST_CASE("An unchanged kolo program runs with srun's variables", "[tools][launchers]") {
  Watchdog watchdog("kolo with SLURM variables", seconds(90));
  const std::string job = JobIdWithFreePort();
  std::vector<ProcessResult> runs = RunRanks({QUICKSTART_PATH}, {SrunEnv(0, job), SrunEnv(1, job)});
  CheckTwoRanks(runs, "SLURM");
  const std::string address =
      "127.0.0.1:" + std::to_string(DerivedControllerPort("slurm:" + job + ".0"));
  CHECK(CountOccurrences(runs[0].err, "controller " + address) == 1);
  CHECK(CountOccurrences(runs[0].err, "first host of SLURM_JOB_NODELIST") == 1);
}

TEST_CASE("A controller port that is taken fails init with a message, not a hang",
          "[tools][launchers]") {
  Watchdog watchdog("kolo with a taken controller port", seconds(90));
  const std::string job = JobIdWithFreePort();
  PortHolder taken(DerivedControllerPort("slurm:" + job + ".0"));
  REQUIRE(taken.port() != 0);
  std::vector<std::string> env0 = SrunEnv(0, job), env1 = SrunEnv(1, job);
  env0.push_back("KOLO_START_TIMEOUT_SECONDS=5");
  env1.push_back("KOLO_START_TIMEOUT_SECONDS=5");
  std::vector<ProcessResult> runs = RunRanks({QUICKSTART_PATH}, {env0, env1});
  const std::string port = std::to_string(taken.port());
  {
    INFO(runs[0].err);
    CHECK(runs[0].exit_code != 0);
    CHECK_THAT(runs[0].err, Catch::Contains("cannot listen on 127.0.0.1:" + port) &&
                                Catch::Contains("address in use") &&
                                Catch::Contains("SLURM_JOB_ID.SLURM_STEP_ID=" + job + ".0"));
  }
  {
    INFO(runs[1].err);
    CHECK(runs[1].exit_code != 0);
    CHECK(runs[1].seconds < 60);  // bounded by KOLO_START_TIMEOUT_SECONDS, generously
    CHECK_THAT(runs[1].err, Catch::Contains("127.0.0.1:" + port));
  }
}

}  // namespace kolo::testing
