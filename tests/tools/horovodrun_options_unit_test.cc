// horovodrun's options in kolorun's parser, without a process: argparse's spellings
// (option_table.h), the settings they make (horovodrun_options.h), the --config-file reader
// (config_file.h) and horovodrun's output layout (output_streams.h).
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <string>

#include "launcher/config_file.h"
#include "launcher/launch_options.h"
#include "launcher/option_table.h"
#include "launcher/output_streams.h"
#include "tests/support/temp_dir.h"

namespace kolo::launcher {
namespace {

using kolo::testing::TempDir;

std::map<std::string, std::string> EnvOf(const LaunchOptions& options) {
  std::map<std::string, std::string> env;
  for (const auto& [name, value] : options.rank_settings.env) env[name] = value;
  return env;
}

TEST_CASE("ResolveOption takes every spelling argparse takes", "[tools][horovodrun]") {
  auto exact = ResolveOption("--num-proc");
  REQUIRE(exact.ok());
  CHECK(std::string(exact->spec->dest) == "num_proc");
  CHECK_FALSE(exact->value.has_value());

  auto equals = ResolveOption("-np=4");
  REQUIRE(equals.ok());
  CHECK(std::string(equals->spec->dest) == "num_proc");
  CHECK(*equals->value == "4");

  auto attached = ResolveOption("-p2222");
  REQUIRE(attached.ok());
  CHECK(attached->spelling == "-p");
  CHECK(*attached->value == "2222");

  auto prefix = ResolveOption("--fusion-thr=32");
  REQUIRE(prefix.ok());
  CHECK(prefix->spelling == "--fusion-threshold-mb");
  CHECK(*prefix->value == "32");
  // Two spellings of one option are one match.
  CHECK(std::string(ResolveOption("--min-n")->spec->dest) == "min_num_proc");

  CHECK(ResolveOption("--frobnicate").status().message() == "unknown option '--frobnicate'");
  CHECK(ResolveOption("--frob=1").status().message() == "unknown option '--frob'");
  CHECK(ResolveOption("-q").status().message() == "unknown option '-q'");
  CHECK(ResolveOption("--host")->spelling == "--host");  // kolo's own, exact
  CHECK_THAT(ResolveOption("--hos").status().message(),
             Catch::StartsWith("ambiguous option '--hos': could match ") &&
                 Catch::Contains("--hosts") && Catch::Contains("--hostfile"));
  CHECK(ResolveOption("--gloo=1").status().message() == "--gloo takes no value");
  CHECK(ResolveOption("--blacklist-cooldown-range=1").status().message() ==
        "--blacklist-cooldown-range takes two values: --blacklist-cooldown-range MIN MAX");
}

TEST_CASE("horovodrun's launcher options land in kolorun's own", "[tools][horovodrun]") {
  TempDir dir("kolorun-hostfile-");
  std::ofstream(dir.path() + "/hosts") << "localhost slots=3\n";
  auto elastic = ParseLaunchOptions({"--min-num-proc=1", "--max-num-proc", "3", "-hostfile",
                                     dir.path() + "/hosts", "--slots-per-host", "2", "prog"});
  REQUIRE(elastic.ok());
  CHECK(elastic->elastic.enabled);
  CHECK(elastic->elastic.min_np == 1);
  CHECK(elastic->elastic.max_np == 3);
  CHECK(elastic->elastic.slots == 2);
  CHECK(elastic->hosts.size() == 1);

  auto ssh = ParseLaunchOptions({"--num-proc", "2", "--hosts=a:1,b:1", "-p2222",
                                 "--ssh-identity-file", "/k", "--verbose", "-prefix-timestamp",
                                 "--output-filename", "out", "prog"});
  REQUIRE(ssh.ok());
  CHECK(ssh->num_ranks == 2);
  CHECK(ssh->hosts.size() == 2);
  CHECK(ssh->ssh.port == 2222);
  CHECK(ssh->ssh.identity == "/k");
  CHECK(ssh->verbose);
  CHECK(ssh->prefix_timestamps);
  CHECK(ssh->output_filename == "out");

  CHECK(ParseLaunchOptions({"-cb"})->check_build);  // no -np, no program: as horovodrun
  CHECK(ParseLaunchOptions({"--version", "--frobnicate"})->show_version);  // argparse exits first
  CHECK(ParseLaunchOptions({"-np", "1", "--output-dir", "a", "--output-filename", "b", "p"})
            .status()
            .message() == "give one of --output-dir and --output-filename");
}

TEST_CASE("horovodrun's tuning options become KOLO_* variables in kolo's units",
          "[tools][horovodrun]") {
  auto options = ParseLaunchOptions({"-np",
                                     "1",
                                     "--fusion-threshold-mb",
                                     "32",
                                     "--cycle-time-ms=2.5",
                                     "--cache-capacity",
                                     "7",
                                     "--no-hierarchical-allreduce",
                                     "--autotune",
                                     "--timeline-filename",
                                     "t.json",
                                     "--timeline-mark-cycles",
                                     "--stall-check-warning-time-seconds",
                                     "90",
                                     "--stall-check-shutdown-time-seconds",
                                     "0",
                                     "--log-level",
                                     "DEBUG",
                                     "--gloo-timeout-seconds",
                                     "45",
                                     "--tcp",
                                     "p"});
  REQUIRE(options.ok());
  auto env = EnvOf(*options);
  CHECK(env["KOLO_FUSION_THRESHOLD"] == "33554432");
  CHECK(env["KOLO_CYCLE_TIME_MS"] == "2.5");
  CHECK(env["KOLO_CACHE_CAPACITY"] == "7");
  CHECK(env["KOLO_HIERARCHICAL"] == "off");
  CHECK(env["KOLO_AUTOTUNE"] == "1");
  CHECK(env["KOLO_TIMELINE"] == "t.json");
  CHECK(env["KOLO_TIMELINE_MARK_CYCLES"] == "1");
  CHECK(env["KOLO_STALL_CHECK_SECONDS"] == "90");
  CHECK(env["KOLO_STALL_SHUTDOWN_SECONDS"] == "0");
  CHECK(env["KOLO_LOG_LEVEL"] == "debug");
  CHECK(env["KOLO_TIMEOUT_SECONDS"] == "45");
  CHECK(env["KOLO_TRANSPORT"] == "tcp");
  CHECK(env["NCCL_IB_DISABLE"] == "1");
  CHECK(options->rank_settings.notes.empty());

  // --no-stall-check wins over a warning time, as in Horovod (no check at all).
  auto off = ParseLaunchOptions(
      {"-np", "1", "--stall-check-warning-time-seconds", "5", "--no-stall-check", "p"});
  CHECK(EnvOf(*off)["KOLO_STALL_CHECK_SECONDS"] == "0");
  // --stall-check (hidden) and `stall_check: enabled: true` win over the environment's switch.
  auto on = ParseLaunchOptions({"-np", "1", "--stall-check", "p"});
  CHECK(EnvOf(*on)["HOROVOD_STALL_CHECK_DISABLE"] == "0");
  CHECK(EnvOf(*on).count("KOLO_STALL_CHECK_SECONDS") == 0);
  // A later spelling of the same option wins.
  auto later = ParseLaunchOptions({"-np", "1", "--autotune", "--no-autotune", "p"});
  CHECK(EnvOf(*later)["KOLO_AUTOTUNE"] == "0");
}

TEST_CASE("A horovodrun value outside horovodrun's or kolo's range names the option",
          "[tools][horovodrun]") {
  using Case = std::pair<std::vector<std::string>, std::string>;
  auto [args, message] = GENERATE(
      Case{{"--fusion-threshold-mb", "-1"},
           "--fusion-threshold-mb must be an integer >= 0, got '-1'"},
      Case{{"--fusion-threshold-mb", "5000"},
           "--fusion-threshold-mb 5000: KOLO_FUSION_THRESHOLD='5242880000' is invalid"},
      Case{{"--cycle-time-ms", "x"}, "--cycle-time-ms must be a number >= 0, got 'x'"},
      Case{{"--autotune-gaussian-process-noise", "1.5"},
           "--autotune-gaussian-process-noise must be a number in [0, 1], got '1.5'"},
      Case{{"--autotune-steps-per-sample", "0"},
           "--autotune-steps-per-sample 0: KOLO_AUTOTUNE_STEPS_PER_SAMPLE='0' is invalid"},
      Case{{"--log-level", "LOUD"},
           "--log-level must be one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL, got 'LOUD'"},
      Case{{"--gloo-timeout-seconds", "0"},
           "--gloo-timeout-seconds 0: KOLO_TIMEOUT_SECONDS='0' is invalid"});
  args.insert(args.begin(), {"-np", "1"});
  args.push_back("p");
  auto options = ParseLaunchOptions(args);
  REQUIRE_FALSE(options.ok());
  CHECK_THAT(options.status().message(), Catch::StartsWith(message));
}

TEST_CASE("Options kolo has nothing to do for each give one line saying why",
          "[tools][horovodrun]") {
  auto options = ParseLaunchOptions({"-np", "1", "--gloo", "--mpi-threads-disable",
                                     "--num-nccl-streams", "2", "--hierarchical-allgather", "p"});
  REQUIRE(options.ok());
  CHECK(options->rank_settings.env.empty());
  const auto& notes = options->rank_settings.notes;
  REQUIRE(notes.size() == 4);
  CHECK_THAT(notes[0],
             Catch::StartsWith("--hierarchical-allgather has no effect: KOLO_HIERARCHICAL"));
  CHECK_THAT(notes[1],
             Catch::StartsWith("--mpi-threads-disable has no effect: kolo does not use MPI"));
  CHECK_THAT(notes[2], Catch::StartsWith("--num-nccl-streams has no effect: "));
  CHECK_THAT(notes[3], Catch::StartsWith("--gloo has no effect: kolo's own controller"));
  // --jsrun: a launcher kolo does not have; an error where jsrun is not installed at all.
  CHECK_THAT(ResolveSettings({{"controller", {"jsrun", "--jsrun"}}}, false).status().message(),
             Catch::StartsWith("--jsrun: jsrun is not installed here"));
  CHECK_THAT(ResolveSettings({{"controller", {"jsrun", "--jsrun"}}}, true)->notes.at(0),
             Catch::StartsWith("--jsrun has no effect: kolorun starts the ranks itself"));
}

TEST_CASE("The config file's YAML subset is read as PyYAML reads it", "[tools][horovodrun]") {
  auto entries = ParseYamlSubset(
      "---\n# settings\ncontroller: gloo   # a comment\n\nparams:\n  fusion_threshold_mb: 32\n"
      "  cycle_time_ms: '2.5'\r\nautotune:\ntimeline:\n    filename: \"a #b.json\"\n"
      "    mark_cycles: yes\n",
      "f.yaml");
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 6);
  CHECK((*entries)[0].key == "controller");
  CHECK((*entries)[0].value == "gloo");
  CHECK((*entries)[1].key == "params.fusion_threshold_mb");
  CHECK((*entries)[1].line == 6);
  CHECK((*entries)[2].value == "2.5");
  CHECK((*entries)[3].key == "autotune");  // an empty section: null
  CHECK((*entries)[3].is_null);
  CHECK((*entries)[4].value == "a #b.json");
  auto settings = ConfigSettings(*entries, "f.yaml");
  REQUIRE(settings.ok());
  CHECK((*settings)["timeline_mark_cycles"].value == "1");
  CHECK((*settings)["fusion_threshold_mb"].source == "f.yaml:6: params.fusion_threshold_mb");

  CHECK(ParseYamlSubset("params:\n  - 1\n", "f").status().message() ==
        "f:2: lists are not among Horovod's settings");
  CHECK_THAT(ParseYamlSubset("params:\n  a:\n    b: 1\n", "f").status().message(),
             Catch::StartsWith("f:3: unexpected indentation"));
  CHECK_THAT(ParseYamlSubset("params: {a: 1}\n", "f").status().message(),
             Catch::StartsWith("f:1: '{a: 1}' is YAML kolo does not read"));
  CHECK(ParseYamlSubset("\tparams: 1\n", "f").status().message() == "f:1: tabs cannot indent YAML");
}

TEST_CASE("A config key kolo does not know is an error naming it", "[tools][horovodrun]") {
  auto unknown = ConfigSettings(*ParseYamlSubset("params:\n  fusion_threshold: 32\n", "f"), "f");
  CHECK_THAT(unknown.status().message(),
             Catch::StartsWith("f:2: unknown key 'params.fusion_threshold' (kolo reads Horovod's "
                               "keys: controller, params.fusion_threshold_mb"));
  auto section = ConfigSettings(*ParseYamlSubset("tuning:\n", "f"), "f");
  CHECK_THAT(section.status().message(), Catch::StartsWith("f:1: unknown key 'tuning'"));
  auto scalar = ConfigSettings(*ParseYamlSubset("params: 3\n", "f"), "f");
  CHECK(scalar.status().message() == "f:1: params must be a section of keys, not a value");
  auto boolean = ConfigSettings(*ParseYamlSubset("autotune:\n  enabled: maybe\n", "f"), "f");
  CHECK(boolean.status().message() == "f:2: autotune.enabled must be true or false, got 'maybe'");
}

TEST_CASE("The command line wins over the config file", "[tools][horovodrun]") {
  TempDir dir("kolorun-config-");
  const std::string path = dir.path() + "/job.yaml";
  std::ofstream(path) << "controller: mpi\nparams:\n  fusion_threshold_mb: 16\n"
                         "  cycle_time_ms: 3\nstall_check:\n  enabled: false\n";
  auto options = ParseLaunchOptions(
      {"-np", "1", "--fusion-threshold-mb", "8", "--config-file", path, "--gloo", "p"});
  REQUIRE(options.ok());
  auto env = EnvOf(*options);
  CHECK(env["KOLO_FUSION_THRESHOLD"] == "8388608");  // the command line's, before or after
  CHECK(env["KOLO_CYCLE_TIME_MS"] == "3");
  CHECK(env["KOLO_STALL_CHECK_SECONDS"] == "0");
  REQUIRE(options->rank_settings.notes.size() == 1);  // --gloo, not the file's mpi
  CHECK_THAT(options->rank_settings.notes[0], Catch::StartsWith("--gloo has no effect"));
  CHECK_THAT(ParseLaunchOptions({"-np", "1", "--config-file", dir.path() + "/none", "p"})
                 .status()
                 .message(),
             Catch::StartsWith("--config-file: cannot read '"));
}

TEST_CASE("--output-filename writes horovodrun's layout", "[tools][horovodrun]") {
  OutputStyle style;
  style.horovod_layout_digits = 2;
  SetOutputStyle(style);
  CHECK(StyledCopyPath("logs/rank.3.out") == "logs/rank.03/stdout");
  CHECK(StyledCopyPath("logs/rank.11.err") == "logs/rank.11/stderr");
  CHECK(StyledCopyPath("/a.b/worker.h:0.out") == "/a.b/worker.h:0/stdout");
  SetOutputStyle(OutputStyle{});
  CHECK(StyledCopyPath("logs/rank.3.out") == "logs/rank.3.out");
}

}  // namespace
}  // namespace kolo::launcher
