// Horovod's variables (core/config/horovod_env.h): the tables cover every variable Horovod
// 0.28.1 reads (tests/core/data/horovod_0.28.1_variables.txt, extracted from its source), and
// each handling works as documented: an alias reads as its KOLO_ row, a mapped variable changes
// or checks kolo's options, a warned one gives exactly one warning naming it and why (none for
// its quiet values), and a refused value fails init saying what kolo supports.
#include "core/config/horovod_env.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "kolo/options.h"

using kolo::HorovodHandling;
using kolo::HorovodVariable;
using kolo::Options;

namespace {

std::string ErrorOf(const std::map<std::string, std::string>& env) {
  auto options = Options::FromMap(env);
  return options.ok() ? std::string("(no error)") : options.status().message();
}

// The warnings FromMap gives for `env` (it must succeed).
std::vector<std::string> WarningsOf(const std::map<std::string, std::string>& env) {
  auto options = Options::FromMap(env);
  INFO(options.status().ToString());
  REQUIRE(options.ok());
  return options->environment_warnings;
}

// The variable names of the committed list, without comments.
std::vector<std::string> HorovodList() {
  std::ifstream in(KOLO_HOROVOD_VARIABLES_LIST);
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string name;
    if (words >> name) names.push_back(name);
  }
  return names;
}

const HorovodVariable* Find(const std::string& name) {
  for (const HorovodVariable& v : kolo::HorovodVariables()) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

std::vector<const HorovodVariable*> OfHandling(HorovodHandling handling) {
  std::vector<const HorovodVariable*> found;
  for (const HorovodVariable& v : kolo::HorovodVariables()) {
    if (v.handling == handling) found.push_back(&v);
  }
  return found;
}

}  // namespace

TEST_CASE("Every variable Horovod 0.28.1 reads is an alias, mapped, warned about or refused",
          "[core][options][horovod]") {
  const std::vector<std::string> list = HorovodList();
  REQUIRE(list.size() == 52);  // issue 54's 46, and the six the file's comment explains
  const std::vector<std::string> aliases = kolo::HorovodAliasNames();
  const std::set<std::string> alias_set(aliases.begin(), aliases.end());
  for (const std::string& name : list) {
    INFO(name << " is in Horovod 0.28.1's list but in none of kolo's tables");
    CHECK((alias_set.count(name) == 1 || Find(name) != nullptr));
  }
  // One handling each: no name is both an alias and a row of the Horovod table.
  std::set<std::string> seen;
  for (const HorovodVariable& v : kolo::HorovodVariables()) {
    INFO(v.name);
    CHECK(alias_set.count(v.name) == 0);
    CHECK(seen.insert(v.name).second);
    CHECK(std::string(v.detail).size() > (v.identity != nullptr ? 3 : 10));
    CHECK(v.handling != HorovodHandling::kAlias);
  }
  // HOROVOD_HOSTNAME is KOLO_HOSTNAME's alias, and only that.
  CHECK(alias_set.count("HOROVOD_HOSTNAME") == 1);
  CHECK(Find("HOROVOD_HOSTNAME") == nullptr);
  // Each of the four handlings is used.
  CHECK(alias_set.size() >= 16);
  CHECK(OfHandling(HorovodHandling::kMapped).size() >= 8);
  CHECK(OfHandling(HorovodHandling::kWarned).size() >= 20);
  CHECK(OfHandling(HorovodHandling::kRefused).size() == 2);
}

TEST_CASE("Horovod's aliases read as their KOLO_ rows, which win", "[core][options][horovod]") {
  auto options = Options::FromMap({{"HOROVOD_HOSTNAME", "node7"},
                                   {"HOROVOD_LOG_LEVEL", "INFO"},  // horovodrun --log-level INFO
                                   {"HOROVOD_GLOO_TIMEOUT_SECONDS", "45"},
                                   {"HOROVOD_FUSION_THRESHOLD", "33554432"},
                                   {"HOROVOD_CYCLE_TIME", "0.5"},
                                   {"HOROVOD_AUTOTUNE", "1"},
                                   {"HOROVOD_AUTOTUNE_LOG", "/tmp/tune.csv"},
                                   {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5"},
                                   {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "20"},
                                   {"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"}});
  REQUIRE(options.ok());
  CHECK(options->host == "node7");
  CHECK(options->log_level == "info");
  CHECK(options->timeout_seconds == 45);
  CHECK(options->fusion_threshold_bytes == 32 << 20);
  CHECK(options->cycle_time_ms == 0.5);
  CHECK(options->autotune);
  CHECK(options->autotune_log == "/tmp/tune.csv");
  CHECK(options->autotune_warmup_samples == 5);
  CHECK(options->autotune_steps_per_sample == 20);
  CHECK(options->hierarchical == kolo::Hierarchical::kOff);
  CHECK(options->environment_warnings.empty());
  auto wins = Options::FromMap({{"KOLO_HOSTNAME", "a"}, {"HOROVOD_HOSTNAME", "b"}});
  REQUIRE(wins.ok());
  CHECK(wins->host == "a");
  // An alias takes its row's grammar: Horovod reads "true" as 0 (strtol), kolo refuses it.
  CHECK(ErrorOf({{"HOROVOD_AUTOTUNE", "true"}}) ==
        "HOROVOD_AUTOTUNE='true' is invalid: expected 0 or 1");
}

TEST_CASE("Horovod's mapped variables change or check kolo's options", "[core][options][horovod]") {
  auto stall = Options::FromMap(
      {{"HOROVOD_STALL_CHECK_DISABLE", "1"}, {"HOROVOD_STALL_CHECK_TIME_SECONDS", "20"}});
  REQUIRE(stall.ok());
  CHECK(stall->stall_check_seconds == 0);  // disabling wins, as in Horovod
  auto kept = Options::FromMap({{"HOROVOD_STALL_CHECK_DISABLE", "0"}});
  REQUIRE(kept.ok());
  CHECK(kept->stall_check_seconds == 60);
  CHECK(ErrorOf({{"HOROVOD_STALL_CHECK_DISABLE", "yes"}}) ==
        "HOROVOD_STALL_CHECK_DISABLE='yes' is invalid: expected 0 or 1");

  // What common Horovod images set, in any case: accepted without a word.
  for (const char* gloo : {"gloo", "GLOO"}) {
    CHECK(WarningsOf({{"HOROVOD_CONTROLLER", gloo}, {"HOROVOD_CPU_OPERATIONS", gloo}}).empty());
  }
  CHECK(WarningsOf({{"HOROVOD_CONTROLLER", ""}}).empty());  // set but empty: unset

  auto elastic = Options::FromMap({{"HOROVOD_ELASTIC", "1"},
                                   {"KOLO_ELASTIC_RENDEZVOUS", "127.0.0.1:4000"},
                                   {"KOLO_ELASTIC_WORKER_ID", "localhost:0"}});
  REQUIRE(elastic.ok());
  CHECK(elastic->elastic_rendezvous == "127.0.0.1:4000");
  CHECK(Options::FromMap({{"HOROVOD_ELASTIC", "0"}}).ok());

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
  CHECK(ErrorOf({{"HOROVOD_RANK", " 0"}}) ==
        "HOROVOD_RANK=' 0' is invalid: expected an integer in [0, 1048576]");
}

TEST_CASE("Each warned Horovod variable gives one warning naming it and why, once",
          "[core][options][horovod]") {
  int checked = 0;
  for (const HorovodVariable* v : OfHandling(HorovodHandling::kWarned)) {
    // A value that asks for something (none of the quiet ones), outside a kolorun job.
    const std::string value = "7";
    INFO(v->name << "=" << value);
    const std::vector<std::string> warnings = WarningsOf({{v->name, value}});
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::StartsWith(std::string(v->name)));
    CHECK_THAT(warnings[0], Catch::Contains(" is ignored: ") && Catch::Contains(v->detail));
    if (v->secret) {
      CHECK_THAT(warnings[0], !Catch::Contains(value));
    } else {
      CHECK_THAT(warnings[0], Catch::Contains("='7'"));
    }
    ++checked;
  }
  CHECK(checked >= 20);
  // The six issue 54 found ignored without a word.
  for (const char* name : {"HOROVOD_TORUS_ALLREDUCE", "HOROVOD_ENABLE_ASYNC_COMPLETION",
                           "HOROVOD_ENABLE_XLA_OPS", "HOROVOD_CCL_CACHE"}) {
    INFO(name);
    CHECK(WarningsOf({{name, "1"}}).size() == 1);
  }
  CHECK(WarningsOf({{"HOROVOD_DISABLE_NVTX_RANGES", "0"}}).size() == 1);
  CHECK(WarningsOf({{"HOROVOD_ADASUM_MPI_CHUNK_SIZE", "1048576"}}) ==
        std::vector<std::string>{
            "HOROVOD_ADASUM_MPI_CHUNK_SIZE='1048576' is ignored: kolo's Adasum (kolo.torch) "
            "combines the tensors of an allgather on each rank, in no MPI chunks"});
  // Several at once: one line each, in the table's order, and no near-miss warning besides.
  CHECK(WarningsOf({{"HOROVOD_TORUS_ALLREDUCE", "1"},
                    {"HOROVOD_THREAD_AFFINITY", "0,1"},
                    {"HOROVOD_NUM_NCCL_STREAMS", "2"}})
            .size() == 3);
  // The secret's value never appears.
  const std::vector<std::string> secret = WarningsOf({{"_HOROVOD_SECRET_KEY", "c2VjcmV0"}});
  REQUIRE(secret.size() == 1);
  CHECK_THAT(secret[0], !Catch::Contains("c2VjcmV0"));
}

TEST_CASE("Reading the environment again does not repeat a warning (a second init, a reset)",
          "[core][options][horovod]") {
  REQUIRE(setenv("HOROVOD_ENABLE_ASYNC_COMPLETION", "1", 1) == 0);
  auto first = Options::FromEnvironment();
  auto second = Options::FromEnvironment();
  unsetenv("HOROVOD_ENABLE_ASYNC_COMPLETION");
  INFO(first.status().ToString());
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  int named = 0;
  for (const std::string& warning : first->environment_warnings) {
    named += warning.rfind("HOROVOD_ENABLE_ASYNC_COMPLETION='1' is ignored", 0) == 0 ? 1 : 0;
  }
  CHECK(named == 1);
  for (const std::string& warning : second->environment_warnings) {
    CHECK_THAT(warning, !Catch::Contains("HOROVOD_ENABLE_ASYNC_COMPLETION"));
  }
}

TEST_CASE("A warned Horovod variable is quiet when it asks for what kolo does anyway",
          "[core][options][horovod]") {
  CHECK(WarningsOf({{"HOROVOD_TORUS_ALLREDUCE", "0"},
                    {"HOROVOD_NUM_NCCL_STREAMS", "1"},
                    {"HOROVOD_DISABLE_GROUP_FUSION", "0"},
                    {"HOROVOD_DYNAMIC_PROCESS_SETS", "1"},  // Horovod's test suites set it
                    {"HOROVOD_DISABLE_NVTX_RANGES", "1"},
                    {"HOROVOD_MPI_THREADS_DISABLE", "1"},
                    {"HOROVOD_ENABLE_XLA_OPS", "0"},
                    {"HOROVOD_THREAD_AFFINITY", ""}})
            .empty());
  // kolorun exports horovodrun's cross rank and size to every rank.
  CHECK(WarningsOf({{"KOLO_RANK", "0"},
                    {"KOLO_SIZE", "2"},
                    {"KOLO_CONTROLLER", "127.0.0.1:2990"},
                    {"HOROVOD_CROSS_RANK", "0"},
                    {"HOROVOD_CROSS_SIZE", "1"}})
            .empty());
  CHECK(WarningsOf({{"HOROVOD_CROSS_RANK", "0"}}).size() == 1);  // set by someone else
  // HOROVOD_HIERARCHICAL_ALLGATHER agreeing with KOLO_HIERARCHICAL, then not.
  CHECK(
      WarningsOf({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}, {"HOROVOD_HIERARCHICAL_ALLGATHER", "1"}})
          .empty());
  CHECK(WarningsOf({{"HOROVOD_HIERARCHICAL_ALLGATHER", "1"}}).size() == 1);
}

TEST_CASE("A Horovod value kolo cannot honour fails init saying what kolo supports",
          "[core][options][horovod]") {
  CHECK(ErrorOf({{"HOROVOD_CONTROLLER", "mpi"}}) ==
        "HOROVOD_CONTROLLER='mpi' is not supported: kolo's controller is gRPC; unset it or set "
        "gloo");
  CHECK(ErrorOf({{"HOROVOD_CPU_OPERATIONS", "ccl"}}) ==
        "HOROVOD_CPU_OPERATIONS='ccl' is not supported: kolo's CPU collectives run on its own "
        "TCP ring or shared memory (KOLO_TRANSPORT); unset it or set gloo");
  CHECK(ErrorOf({{"HOROVOD_ELASTIC", "1"}}) ==
        "HOROVOD_ELASTIC='1' is not supported: kolo's elastic jobs are started by kolorun "
        "--min-np/--max-np/--host-discovery-script (docs/ELASTIC.md), which sets "
        "KOLO_ELASTIC_RENDEZVOUS; this process has none");
  for (const HorovodVariable* v : OfHandling(HorovodHandling::kRefused)) {
    INFO(v->name);
    CHECK(ErrorOf({{v->name, "10.0.0.1"}}) ==
          std::string(v->name) + "='10.0.0.1' is not supported: " + v->detail);
    CHECK_THAT(v->detail, Catch::Contains("start the job with kolorun"));
  }
}

TEST_CASE("The Horovod table prints as markdown, one row per handling",
          "[core][options][horovod]") {
  const std::vector<std::string> rows = kolo::HorovodVariablesMarkdownRows();
  REQUIRE(rows.size() == 6);
  CHECK_THAT(rows[2], Catch::StartsWith("| aliases: ") && Catch::Contains("`HOROVOD_HOSTNAME`"));
  CHECK_THAT(rows[3], Catch::StartsWith("| mapped: ") &&
                          Catch::Contains("`HOROVOD_CONTROLLER` (accepted: gloo)"));
  CHECK_THAT(rows[4], Catch::StartsWith("| warned: ") &&
                          Catch::Contains("`HOROVOD_TORUS_ALLREDUCE` (quiet: 0)"));
  CHECK_THAT(rows[5], Catch::StartsWith("| refused: "));
  const std::string text = kolo::FormatConfigTable();
  for (const std::string& row : rows) CHECK_THAT(text, Catch::Contains(row + "\n"));
}
