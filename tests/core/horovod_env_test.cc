// Horovod's variables beyond the config table's aliases (core/config/horovod_env.h), one case
// per way kolo handles them: an alias that works, a variable with no effect, a switch accepted
// only off, a variable always refused, and Horovod's identity checked against kolo's.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "kolo/options.h"

using kolo::Options;

namespace {

std::string ErrorOf(const std::map<std::string, std::string>& env) {
  auto options = Options::FromMap(env);
  return options.ok() ? std::string("(no error)") : options.status().message();
}

}  // namespace

TEST_CASE("HOROVOD_HOSTNAME and HOROVOD_STALL_CHECK_DISABLE work", "[core][options][horovod]") {
  auto options = Options::FromMap({{"HOROVOD_HOSTNAME", "node7"},
                                   {"HOROVOD_STALL_CHECK_DISABLE", "1"},
                                   {"HOROVOD_STALL_CHECK_TIME_SECONDS", "20"}});
  REQUIRE(options.ok());
  CHECK(options->host == "node7");
  CHECK(options->stall_check_seconds == 0);  // disabling wins, as in Horovod

  auto kept = Options::FromMap({{"HOROVOD_STALL_CHECK_DISABLE", "0"}});
  REQUIRE(kept.ok());
  CHECK(kept->stall_check_seconds == 60);
  CHECK(ErrorOf({{"HOROVOD_STALL_CHECK_DISABLE", "yes"}}) ==
        "HOROVOD_STALL_CHECK_DISABLE=yes is not 0 or 1 (1 disables the stall check "
        "(KOLO_STALL_CHECK_SECONDS=0), 0 leaves it on)");
}

TEST_CASE("Horovod variables about parts kolo does not have are accepted",
          "[core][options][horovod]") {
  const char* name =
      GENERATE("HOROVOD_DYNAMIC_PROCESS_SETS", "HOROVOD_MIXED_INSTALL",
               "HOROVOD_MPI_THREADS_DISABLE", "HOROVOD_GLOO_IFACE", "HOROVOD_GPU_ALLREDUCE",
               "HOROVOD_CROSS_RANK", "HOROVOD_HIERARCHICAL_ALLGATHER");
  auto options = Options::FromMap({{name, "1"}});
  REQUIRE(options.ok());
  CHECK(options->environment_warnings.empty());  // no near-miss warning either
}

TEST_CASE("A Horovod switch kolo lacks is accepted off and refused on",
          "[core][options][horovod]") {
  CHECK(Options::FromMap({{"HOROVOD_DISABLE_GROUP_FUSION", "0"},
                          {"HOROVOD_ELASTIC", "0"},
                          {"HOROVOD_NUM_NCCL_STREAMS", "1"}})
            .ok());
  CHECK(ErrorOf({{"HOROVOD_DISABLE_GROUP_FUSION", "1"}}) ==
        "HOROVOD_DISABLE_GROUP_FUSION=1 is not supported: kolo always fuses a group's tensors "
        "together with other ready tensors; unset it or set 0");
  CHECK(ErrorOf({{"HOROVOD_ELASTIC", "1"}}) ==
        "HOROVOD_ELASTIC=1 is not supported: kolo's elastic jobs are started by kolorun "
        "--min-np/--max-np/--host-discovery-script (docs/ELASTIC.md), which sets "
        "KOLO_ELASTIC_RENDEZVOUS; this process has none");
  CHECK(ErrorOf({{"HOROVOD_NUM_NCCL_STREAMS", "2"}})
            .rfind("HOROVOD_NUM_NCCL_STREAMS=2 is not "
                   "supported",
                   0) == 0);
}

TEST_CASE("HOROVOD_ELASTIC=1 is accepted in an elastic job that kolorun started",
          "[core][options][horovod]") {
  auto options = Options::FromMap({{"HOROVOD_ELASTIC", "1"},
                                   {"KOLO_ELASTIC_RENDEZVOUS", "127.0.0.1:4000"},
                                   {"KOLO_ELASTIC_WORKER_ID", "localhost:0"}});
  REQUIRE(options.ok());
  CHECK(options->elastic_rendezvous == "127.0.0.1:4000");
  CHECK(options->elastic_worker_id == "localhost:0");
  CHECK(options->elastic_timeout_seconds == 600);
  CHECK(ErrorOf({{"HOROVOD_ELASTIC", "yes"}}) ==
        "HOROVOD_ELASTIC=yes is not supported: set 0 or 1");
}

TEST_CASE("Horovod's launcher and controller variables are refused, saying what to use",
          "[core][options][horovod]") {
  CHECK(ErrorOf({{"HOROVOD_CONTROLLER", "gloo"}}) ==
        "HOROVOD_CONTROLLER=gloo is not supported: kolo always uses its own controller on rank "
        "0 (no MPI or Gloo controller); unset it");
  CHECK(ErrorOf({{"HOROVOD_CPU_OPERATIONS", "mpi"}}) ==
        "HOROVOD_CPU_OPERATIONS=mpi is not supported: kolo's CPU data path is chosen by "
        "KOLO_TRANSPORT (shm, tcp or auto); unset it");
  CHECK(ErrorOf({{"HOROVOD_GLOO_RENDEZVOUS_ADDR", "10.0.0.1"}}).find("horovodrun --gloo") !=
        std::string::npos);
  CHECK(Options::FromMap({{"HOROVOD_CONTROLLER", ""}}).ok());  // set but empty: not asked for
}

TEST_CASE("HOROVOD_RANK and HOROVOD_SIZE must agree with kolo's identity",
          "[core][options][horovod]") {
  CHECK(Options::FromMap({{"KOLO_RANK", "1"},
                          {"KOLO_SIZE", "2"},
                          {"KOLO_CONTROLLER", "127.0.0.1:2990"},
                          {"HOROVOD_RANK", "1"},
                          {"HOROVOD_SIZE", "2"}})
            .ok());
  CHECK(ErrorOf({{"KOLO_RANK", "1"},
                 {"KOLO_SIZE", "2"},
                 {"KOLO_CONTROLLER", "127.0.0.1:2990"},
                 {"HOROVOD_RANK", "0"}}) ==
        "HOROVOD_RANK=0 disagrees with kolo's rank 1 (from kolo); kolo reads the job from "
        "kolorun, torchrun, mpirun or srun, not from Horovod's launcher");
  CHECK(ErrorOf({{"HOROVOD_SIZE", "4"}}) ==
        "HOROVOD_SIZE=4 disagrees with kolo's size 1 (no launcher variables: a one-rank job); "
        "kolo reads the job from kolorun, torchrun, mpirun or srun, not from Horovod's "
        "launcher");
}

TEST_CASE("Horovod's autotune variables turn on and configure kolo's autotuner",
          "[core][options][horovod]") {
  auto options = Options::FromMap({{"HOROVOD_AUTOTUNE", "1"},
                                   {"HOROVOD_AUTOTUNE_LOG", "/tmp/tune.csv"},
                                   {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5"},
                                   {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "20"},
                                   {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "10"}});
  REQUIRE(options.ok());
  CHECK(options->autotune);
  CHECK(options->autotune_log == "/tmp/tune.csv");
  CHECK(options->autotune_warmup_samples == 5);
  CHECK(options->autotune_steps_per_sample == 20);
  auto defaults = Options::FromMap({});
  REQUIRE(defaults.ok());
  CHECK_FALSE(defaults->autotune);
  CHECK(defaults->autotune_samples == 3);
}

TEST_CASE("HOROVOD_HIERARCHICAL_ALLREDUCE is KOLO_HIERARCHICAL's alias, 1 on and 0 off",
          "[core][options][horovod]") {
  auto unset = Options::FromMap({});
  REQUIRE(unset.ok());
  CHECK(unset->hierarchical == kolo::Hierarchical::kAuto);
  const std::map<std::string, kolo::Hierarchical> values = {{"1", kolo::Hierarchical::kOn},
                                                            {"0", kolo::Hierarchical::kOff}};
  for (const auto& [value, mode] : values) {
    auto options = Options::FromMap({{"HOROVOD_HIERARCHICAL_ALLREDUCE", value}});
    REQUIRE(options.ok());
    CHECK(options->hierarchical == mode);
  }
  for (const char* value : {"auto", "on", "off", "ON"}) {
    auto options = Options::FromMap({{"KOLO_HIERARCHICAL", value}});
    REQUIRE(options.ok());
  }
  auto on = Options::FromMap({{"KOLO_HIERARCHICAL", "on"}});
  REQUIRE(on.ok());
  CHECK(on->hierarchical == kolo::Hierarchical::kOn);
  CHECK(ErrorOf({{"KOLO_HIERARCHICAL", "2"}}) ==
        "KOLO_HIERARCHICAL='2' is invalid: expected one of auto, on, off, or 1 (on) or 0 (off)");
}
