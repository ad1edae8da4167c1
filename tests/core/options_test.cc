#include "kolo/options.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "core/config/config_table.h"
#include "core/config/near_miss.h"

using kolo::ConfigTable;
using kolo::ConfigVar;
using kolo::LikelyConfigName;
using kolo::Options;

TEST_CASE("An empty environment gives a valid one-rank job with the table's defaults",
          "[core][options]") {
  auto options = Options::FromMap({});
  REQUIRE(options.ok());
  CHECK(options->rank == 0);
  CHECK(options->size == 1);
  CHECK(options->fusion_threshold_bytes == 64 << 20);
  CHECK(options->cycle_time_ms == 1.0);
  CHECK(options->cache_capacity == 1024);
  CHECK(options->timeout_seconds == 30.0);
  // No op waits forever for a name only some ranks submitted: the stall abort is on (30 min).
  CHECK(options->stall_shutdown_seconds == 1800.0);
}

TEST_CASE("KOLO variables are parsed into options", "[core][options]") {
  auto options = Options::FromMap({{"KOLO_RANK", "3"},
                                   {"KOLO_SIZE", "4"},
                                   {"KOLO_LOCAL_RANK", "1"},
                                   {"KOLO_LOCAL_SIZE", "2"},
                                   {"KOLO_CONTROLLER", "10.0.0.1:2990"},
                                   {"KOLO_FUSION_THRESHOLD", "8M"},
                                   {"KOLO_CYCLE_TIME_MS", "2.5"},
                                   {"KOLO_CACHE_CAPACITY", "0"},
                                   {"KOLO_TIMEOUT_SECONDS", "5"},
                                   {"KOLO_LOG_LEVEL", "debug"}});
  REQUIRE(options.ok());
  CHECK(options->rank == 3);
  CHECK(options->size == 4);
  CHECK(options->local_rank == 1);
  CHECK(options->local_size == 2);
  CHECK(options->controller_address == "10.0.0.1:2990");
  CHECK(options->fusion_threshold_bytes == 8 << 20);
  CHECK(options->cycle_time_ms == 2.5);
  CHECK(options->cache_capacity == 0);
  CHECK(options->timeout_seconds == 5.0);
  CHECK(options->log_level == "debug");
}

TEST_CASE("A bad value fails with a message naming the variable", "[core][options]") {
  auto [name, value] = GENERATE(table<std::string, std::string>({
      {"KOLO_SIZE", "0"},
      {"KOLO_SIZE", "four"},
      {"KOLO_RANK", "-1"},
      {"KOLO_FUSION_THRESHOLD", "64Q"},
      {"KOLO_FUSION_THRESHOLD", "8G"},
      {"KOLO_CYCLE_TIME_MS", "fast"},
      {"KOLO_CYCLE_TIME_MS", "nan"},
      {"KOLO_TIMEOUT_SECONDS", "0"},
      {"KOLO_CONTROLLER", "nohostport"},
      {"KOLO_CONTROLLER", "host:70000"},
      {"KOLO_LOG_LEVEL", "loud"},
      {"HOROVOD_FUSION_THRESHOLD", "-5"},
      {"KOLO_FUSION_THRESHOLD", "17179869184G"},
  }));
  auto options = Options::FromMap({{name, value}});
  REQUIRE_FALSE(options.ok());
  CHECK(options.status().code() == kolo::StatusCode::kInvalidArgument);
  CHECK_THAT(options.status().message(), Catch::Contains(name));
  CHECK_THAT(options.status().message(), Catch::Contains(value));
}

TEST_CASE("Horovod aliases work and the KOLO_ name wins", "[core][options]") {
  auto alias_only =
      Options::FromMap({{"HOROVOD_FUSION_THRESHOLD", "1048576"}, {"HOROVOD_CYCLE_TIME", "3"}});
  REQUIRE(alias_only.ok());
  CHECK(alias_only->fusion_threshold_bytes == 1 << 20);
  CHECK(alias_only->cycle_time_ms == 3.0);

  auto both =
      Options::FromMap({{"HOROVOD_FUSION_THRESHOLD", "1048576"}, {"KOLO_FUSION_THRESHOLD", "2M"}});
  REQUIRE(both.ok());
  CHECK(both->fusion_threshold_bytes == 2 << 20);
}

TEST_CASE("torchrun's variables describe the job when KOLO_ ones are absent", "[core][options]") {
  auto options = Options::FromMap({{"RANK", "1"},
                                   {"WORLD_SIZE", "2"},
                                   {"LOCAL_RANK", "1"},
                                   {"LOCAL_WORLD_SIZE", "2"},
                                   {"MASTER_ADDR", "127.0.0.1"},
                                   {"MASTER_PORT", "29500"}});
  REQUIRE(options.ok());
  CHECK(options->rank == 1);
  CHECK(options->size == 2);
  CHECK(options->local_rank == 1);
  CHECK(options->controller_address == "127.0.0.1:29500");

  auto half = Options::FromMap({{"MASTER_ADDR", "127.0.0.1"}});
  REQUIRE_FALSE(half.ok());
  CHECK_THAT(half.status().message(), Catch::Contains("MASTER_PORT"));
}

TEST_CASE("Unknown KOLO_ variables are refused as likely typos", "[core][options]") {
  auto options = Options::FromMap({{"KOLO_FUSION_TRESHOLD", "1M"}});
  REQUIRE_FALSE(options.ok());
  CHECK_THAT(options.status().message(), Catch::Contains("KOLO_FUSION_TRESHOLD"));
  CHECK_THAT(options.status().message(), Catch::Contains("did you mean KOLO_FUSION_THRESHOLD?"));
  auto far = Options::FromMap({{"KOLO_SOMETHING_ELSE", "1"}});
  REQUIRE_FALSE(far.ok());
  CHECK_THAT(far.status().message(), !Catch::Contains("did you mean"));
}

TEST_CASE("Near misses of the table's names are warned about; other variables are not",
          "[core][options]") {
  CHECK(LikelyConfigName("HOROVOD_FUSION_TRESHOLD") == "HOROVOD_FUSION_THRESHOLD");
  CHECK(LikelyConfigName("HOROVOD_FUSION_THRESHHOLD") == "HOROVOD_FUSION_THRESHOLD");
  CHECK(LikelyConfigName("kolo_timeout_seconds") == "KOLO_TIMEOUT_SECONDS");
  CHECK(LikelyConfigName("KOLO_TIMEOUT_SECOND") == "KOLO_TIMEOUT_SECONDS");
  CHECK(LikelyConfigName("KOLO_TIEMOUT_SECONDS") == "KOLO_TIMEOUT_SECONDS");  // a swap
  CHECK(LikelyConfigName("HOROVOD_START_TIMEOUT").empty());                   // an alias itself
  CHECK(LikelyConfigName("KOLO_TIMELINE").empty());                           // a name itself
  CHECK(LikelyConfigName("PATH").empty());
  CHECK(LikelyConfigName("HOROVOD_HIERARCHICAL_ALLREDUCE").empty());
  // Every name and alias of the table is itself, never a near miss of another.
  for (const ConfigVar& var : ConfigTable()) {
    CHECK(LikelyConfigName(var.name).empty());
    for (const char* alias : var.aliases) CHECK(LikelyConfigName(alias).empty());
  }
  auto options = Options::FromMap({{"HOROVOD_CYCLE_TIMES", "5"},
                                   {"HOME", "/root"},
                                   {"horovod_log_level", "debug"},
                                   {"KOLO_CYCLE_TIME_MS", "2"}});
  REQUIRE(options.ok());
  CHECK(options->cycle_time_ms == 2);
  REQUIRE(options->environment_warnings.size() == 2);
  CHECK(options->environment_warnings[0] ==
        "HOROVOD_CYCLE_TIMES is not a variable kolo reads; did you mean HOROVOD_CYCLE_TIME? (it "
        "is ignored)");
  CHECK_THAT(options->environment_warnings[1], Catch::StartsWith("horovod_log_level is not"));
  CHECK(Options::FromMap({{"HOME", "/root"}})->environment_warnings.empty());
}

TEST_CASE("Inconsistent identity is refused", "[core][options]") {
  auto rank_too_big =
      Options::FromMap({{"KOLO_RANK", "4"}, {"KOLO_SIZE", "4"}, {"KOLO_CONTROLLER", "h:1"}});
  REQUIRE_FALSE(rank_too_big.ok());
  CHECK_THAT(rank_too_big.status().message(), Catch::Contains("KOLO_RANK"));

  auto no_controller = Options::FromMap({{"KOLO_RANK", "0"}, {"KOLO_SIZE", "2"}});
  REQUIRE_FALSE(no_controller.ok());
  CHECK_THAT(no_controller.status().message(), Catch::Contains("KOLO_CONTROLLER"));
}

TEST_CASE("A job started by mpirun is no longer split into one-rank jobs", "[core][options]") {
  // Before launcher_env, OMPI_COMM_WORLD_SIZE without KOLO_SIZE was refused; now it is read.
  auto mpi = Options::FromMap(
      {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"KOLO_CONTROLLER", "h:1"}});
  REQUIRE(mpi.ok());
  CHECK(mpi->size == 4);
  CHECK(mpi->identity_source == "Open MPI");
  CHECK(Options::FromMap({{"SLURM_NTASKS", "1"}}).ok());
  CHECK(Options::FromMap({{"SLURM_NTASKS", "2"},
                          {"KOLO_SIZE", "2"},
                          {"KOLO_RANK", "1"},
                          {"KOLO_CONTROLLER", "h:1"}})
            .ok());
}

TEST_CASE("Options built by hand are checked like the environment", "[core][options]") {
  Options stall;
  stall.stall_check_seconds = -1;
  CHECK_THAT(stall.Validate().message(), Catch::Contains("KOLO_STALL_CHECK_SECONDS"));
  Options nan_stall;
  nan_stall.stall_shutdown_seconds = std::nan("");
  CHECK_THAT(nan_stall.Validate().message(), Catch::Contains("KOLO_STALL_SHUTDOWN_SECONDS"));
  Options timeline;
  timeline.timeline_max_mb = 0;
  CHECK_THAT(timeline.Validate().message(), Catch::Contains("KOLO_TIMELINE_MAX_MB"));
  CHECK(Options().Validate().ok());
}

TEST_CASE("Byte sizes accept binary suffixes", "[core][options]") {
  CHECK(*kolo::ParseByteSize("0") == 0);
  CHECK(*kolo::ParseByteSize("4096") == 4096);
  CHECK(*kolo::ParseByteSize("4K") == 4096);
  CHECK(*kolo::ParseByteSize("64MiB") == 64 << 20);
  CHECK(*kolo::ParseByteSize("1G") == int64_t{1} << 30);
  CHECK(*kolo::ParseByteSize("4k") == 4096);
  CHECK(*kolo::ParseByteSize("64MB") == 64 << 20);
  for (const char* bad : {"-1", "4X", "4KK", "99999999999G"}) {
    INFO(bad);
    CHECK_FALSE(kolo::ParseByteSize(bad).ok());
  }
  CHECK_FALSE(kolo::ParseByteSize("").ok());
  CHECK_FALSE(kolo::ParseByteSize("M").ok());
  CHECK_FALSE(kolo::ParseByteSize("1.5M").ok());
  CHECK_FALSE(kolo::ParseByteSize("17179869184G").ok());  // would overflow int64
  CHECK_FALSE(kolo::ParseByteSize("9999999999999999").ok());
}

TEST_CASE("The printed table lists every variable", "[core][options]") {
  std::string text = kolo::FormatConfigTable();
  for (const auto& var : kolo::ConfigTable()) CHECK_THAT(text, Catch::Contains(var.name));
}

TEST_CASE("Security variables are parsed, and a bad secret is never quoted", "[core][options]") {
  const std::string secret(64, 'a');
  auto options = Options::FromMap({{"KOLO_SECRET", secret},
                                   {"KOLO_JOB_ID", "job-7"},
                                   {"KOLO_INSECURE", "1"},
                                   {"KOLO_TLS_CERT", "/c.pem"},
                                   {"KOLO_TLS_KEY", "/k.pem"},
                                   {"KOLO_TLS_CA", "/ca.pem"}});
  REQUIRE(options.ok());
  CHECK(options->secret == secret);
  CHECK(options->job_id == "job-7");
  CHECK(options->insecure);
  CHECK(options->tls_cert == "/c.pem");
  CHECK(options->tls_key == "/k.pem");
  CHECK(options->tls_ca == "/ca.pem");
  for (const std::string bad : {"hunter2-is-my-password-0000000000", "abc", "0123"}) {
    auto refused = Options::FromMap({{"KOLO_SECRET", bad}});
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.status().message(),
               Catch::StartsWith("KOLO_SECRET is invalid (value not shown)"));
    CHECK(refused.status().message().find(bad) == std::string::npos);
  }
  auto both = Options::FromMap({{"KOLO_SECRET", secret}, {"KOLO_SECRET_FILE", "/s"}});
  CHECK(both.status().message() == "KOLO_SECRET and KOLO_SECRET_FILE are both set; set one");
}
