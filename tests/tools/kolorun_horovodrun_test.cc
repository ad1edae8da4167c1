// horovodrun's options on the real kolorun binary: every option of Horovod 0.28.1's parser
// (tests/tools/data/horovodrun_options.txt) in each spelling, the settings reaching the ranks'
// environment, --config-file, -cb, -v, --output-filename, --prefix-output-with-timestamp, and
// the --help text and README table that list them.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"
#include "tests/tools/kolorun_output.h"

namespace kolo::testing {
namespace {

using std::chrono::seconds;

struct HorovodOption {
  std::string dest;
  int values = 0;
  std::string type;
  std::string group;
  bool hidden = false;
  std::vector<std::string> spellings;
};

std::vector<HorovodOption> ReadHorovodOptions() {
  std::ifstream in(std::string(KOLO_TOOLS_TEST_DATA) + "/horovodrun_options.txt");
  std::vector<HorovodOption> options;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::stringstream stream(line);
    for (std::string field; std::getline(stream, field, '\t');) fields.push_back(field);
    REQUIRE(fields.size() >= 6);
    HorovodOption option{fields[0], std::stoi(fields[1]),  fields[2],
                         fields[3], fields[4] == "hidden", {fields.begin() + 5, fields.end()}};
    options.push_back(option);
  }
  return options;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether `word` occurs in `text` between one of `before` and one of `after` (a line's start
// and end count as '\n').
bool Mentions(const std::string& text, const std::string& word, const std::string& before,
              const std::string& after) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const char previous = at == 0 ? '\n' : text[at - 1];
    const size_t end = at + word.size();
    const char next = end < text.size() ? text[end] : '\n';
    if (before.find(previous) != std::string::npos && after.find(next) != std::string::npos) {
      return true;
    }
  }
  return false;
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path) << text;
  REQUIRE(chmod(path.c_str(), mode) == 0);
}

// A value horovodrun takes for `option`, usable by a one-rank job of `true` on this host, and
// the options that must come with it.
struct Example {
  std::vector<std::string> context;  // before the option (-np 1, or hosts for elastic jobs)
  std::string value;
};

Example ExampleFor(const HorovodOption& option, const std::string& dir) {
  const std::string& d = option.dest;
  Example example{{"-np", "1"}, option.type == "int" ? "1" : "x"};
  if (option.type == "float") example.value = "0.5";
  if (d == "log_level") example.value = "INFO";
  if (d == "nics") example.value = "lo";
  if (d == "start_timeout" || d == "gloo_timeout_seconds") example.value = "30";
  if (d == "ssh_identity_file") example.value = "/nonexistent/key";
  if (d == "output_filename") example.value = dir + "/out";
  if (d == "config_file") example.value = dir + "/job.yaml";
  if (d == "hosts") example.value = "localhost:1";
  if (d == "hostfile") example.value = dir + "/hosts";
  if (d == "timeline_filename") example.value = dir + "/t.json";
  if (d == "autotune_log_file") example.value = dir + "/autotune.csv";
  if (d == "mpi_args") example.value = "--map-by ppr:1:node";
  if (d == "binding_args") example.value = "--rankfile r";
  if (d == "min_num_proc" || d == "max_num_proc")
    example.context = {"-np", "1", "-H", "localhost:1"};
  if (d == "host_discovery_script") example.value = "echo localhost:1";
  if (d == "cooldown_range") example.value = "1 2";
  return example;
}

// The ways argparse lets `spelling` carry its value: apart, after '=', attached (-p22).
std::vector<std::vector<std::string>> Spellings(const HorovodOption& option,
                                                const std::string& spelling,
                                                const std::string& value) {
  if (option.values == 0) return {{spelling}};
  if (option.values == 2) {
    const size_t space = value.find(' ');
    return {{spelling, value.substr(0, space), value.substr(space + 1)}};
  }
  std::vector<std::vector<std::string>> forms = {{spelling, value}, {spelling + "=" + value}};
  if (spelling.size() == 2) forms.push_back({spelling + value});
  return forms;
}

TEST_CASE("kolorun takes every option of horovodrun 0.28.1 in every spelling",
          "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("every horovodrun option", seconds(240));
  TempDir dir("kolorun-horovodrun-");
  WriteFile(dir.path() + "/hosts", "localhost slots=1\n");
  WriteFile(dir.path() + "/job.yaml", "params:\n  cycle_time_ms: 2\n");
  const std::vector<HorovodOption> options = ReadHorovodOptions();
  REQUIRE(options.size() == 61);  // 54 listed by horovodrun --help, 7 hidden
  const bool have_jsrun = RunProcess({"/bin/sh", "-c", "command -v jsrun"}).exit_code == 0;
  int runs = 0;
  for (const HorovodOption& option : options) {
    const Example example = ExampleFor(option, dir.path());
    for (const std::string& spelling : option.spellings) {
      for (const std::vector<std::string>& form : Spellings(option, spelling, example.value)) {
        std::vector<std::string> argv = {KOLORUN_PATH};
        argv.insert(argv.end(), example.context.begin(), example.context.end());
        argv.insert(argv.end(), form.begin(), form.end());
        argv.push_back("true");
        ProcessResult run = RunProcess(argv);
        ++runs;
        std::string line;
        for (const std::string& word : argv) line += word + " ";
        INFO(line << "\nstderr: " << run.err);
        CHECK(run.err.find("unknown option") == std::string::npos);
        CHECK(run.err.find("ambiguous option") == std::string::npos);
        if (option.dest == "use_jsrun" && !have_jsrun) {
          CHECK(run.exit_code == 2);
          CHECK_THAT(run.err, Catch::Contains("--jsrun: jsrun is not installed here"));
        } else {
          CHECK(run.exit_code == 0);
        }
      }
    }
  }
  CHECK(runs > 100);
}

TEST_CASE("horovodrun's settings reach every rank in kolo's variables and units",
          "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("horovodrun settings", seconds(60));
  TempDir dir("kolorun-horovodrun-env-");
  ProcessResult run =
      RunProcess({KOLORUN_PATH,
                  "-np",
                  "2",
                  "--fusion-threshold-mb",
                  "32",
                  "--cycle-time-ms=2.5",
                  "--cache-capacity",
                  "2048",
                  "--hierarchical-allreduce",
                  "--autotune",
                  "--autotune-log-file",
                  dir.path() + "/tune.csv",
                  "--autotune-warmup-samples",
                  "4",
                  "--autotune-steps-per-sample",
                  "7",
                  "--timeline-filename",
                  dir.path() + "/t.json",
                  "--timeline-mark-cycles",
                  "--stall-check-warning-time-seconds",
                  "90",
                  "--stall-check-shutdown-time-seconds",
                  "300",
                  "--log-level",
                  "DEBUG",
                  "--gloo-timeout-seconds",
                  "45",
                  "--tcp",
                  "/bin/sh",
                  "-c",
                  "env | grep -E '^(KOLO|NCCL)_'"},
                 // The command line wins over kolorun's environment, as horovodrun's options do.
                 {"KOLO_FUSION_THRESHOLD=1K", "KOLO_TRANSPORT=shm"});
  REQUIRE(run.exit_code == 0);
  CHECK(run.err.empty());
  for (int rank = 0; rank < 2; ++rank) {
    auto vars = VariablesOfRank(run.out, rank);
    CHECK(vars["KOLO_FUSION_THRESHOLD"] == "33554432");  // 32 MiB in bytes
    CHECK(vars["KOLO_CYCLE_TIME_MS"] == "2.5");
    CHECK(vars["KOLO_CACHE_CAPACITY"] == "2048");
    CHECK(vars["KOLO_HIERARCHICAL"] == "on");
    CHECK(vars["KOLO_AUTOTUNE"] == "1");
    CHECK(vars["KOLO_AUTOTUNE_LOG"] == dir.path() + "/tune.csv");
    CHECK(vars["KOLO_AUTOTUNE_WARMUP_SAMPLES"] == "4");
    CHECK(vars["KOLO_AUTOTUNE_STEPS_PER_SAMPLE"] == "7");
    CHECK(vars["KOLO_TIMELINE"] == dir.path() + "/t.json");
    CHECK(vars["KOLO_TIMELINE_MARK_CYCLES"] == "1");
    CHECK(vars["KOLO_STALL_CHECK_SECONDS"] == "90");
    CHECK(vars["KOLO_STALL_SHUTDOWN_SECONDS"] == "300");
    CHECK(vars["KOLO_LOG_LEVEL"] == "debug");
    CHECK(vars["KOLO_TIMEOUT_SECONDS"] == "45");
    CHECK(vars["KOLO_TRANSPORT"] == "tcp");
    CHECK(vars["NCCL_IB_DISABLE"] == "1");
  }
}

TEST_CASE("A kolo job runs with horovodrun's tuning options", "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("kolo job with horovodrun options", seconds(90));
  ProcessResult run =
      RunProcess({KOLORUN_PATH, "-np", "2", "--fusion-threshold-mb", "1", "--cycle-time-ms", "2",
                  "--cache-capacity", "0", "--no-hierarchical-allreduce", "--no-stall-check",
                  "--gloo-timeout-seconds", "60", "--log-level", "WARNING", "--tcp", "--gloo",
                  KOLO_QUICKSTART_PATH});
  CHECK(run.exit_code == 0);
  CHECK(CountOccurrences(run.err, "has no effect") == 1);  // --gloo
}

TEST_CASE("Each option with no effect in kolo prints one line saying why",
          "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("horovodrun notes", seconds(30));
  const std::vector<std::string> inert = {"--disable-cache",
                                          "--network-interface=lo",
                                          "--hierarchical-allgather",
                                          "--torus-allreduce",
                                          "--mpi-threads-disable",
                                          "--mpi-args=--map-by ppr:1:node",
                                          "--binding-args=-x",
                                          "--num-nccl-streams=2",
                                          "--thread-affinity=1",
                                          "--log-without-timestamp",
                                          "--autotune-bayes-opt-max-samples=5",
                                          "--mpi"};
  std::vector<std::string> argv = {KOLORUN_PATH, "-np", "1"};
  argv.insert(argv.end(), inert.begin(), inert.end());
  argv.push_back("true");
  ProcessResult run = RunProcess(argv);
  CHECK(run.exit_code == 0);
  const std::vector<std::string> lines = SplitLines(run.err);
  CHECK(lines.size() == inert.size());
  for (const std::string& option : inert) {
    const std::string name = option.substr(0, option.find('='));
    CHECK(CountOccurrences(run.err, "kolorun: " + name + " has no effect: ") == 1);
  }
}

TEST_CASE("--config-file sets Horovod's keys; the command line wins; unknown keys are named",
          "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("horovodrun config file", seconds(30));
  TempDir dir("kolorun-config-file-");
  const std::string config = dir.path() + "/job.yaml";
  WriteFile(config,
            "controller: gloo\nparams:\n  fusion_threshold_mb: 16\n  cycle_time_ms: 3\n"
            "  hierarchical_allreduce: false\nautotune:\n  enabled: true\n  warmup_samples: 2\n"
            "timeline:\n  filename: 't.json'\n  mark_cycles: true\nstall_check:\n"
            "  enabled: true\n  warning_time_seconds: 120\n  shutdown_time_seconds: 240\n"
            "library_options:\n  gloo_timeout_seconds: 60\nlogging:\n  level: INFO\n");
  ProcessResult run = RunProcess({KOLORUN_PATH, "-np", "1", "--cycle-time-ms", "5", "--config-file",
                                  config, "/bin/sh", "-c", "env | grep ^KOLO_"},
                                 {"KOLO_FUSION_THRESHOLD=1K"});  // the file wins over this
  REQUIRE(run.exit_code == 0);
  auto vars = VariablesOfRank(run.out, 0);
  CHECK(vars["KOLO_FUSION_THRESHOLD"] == "16777216");
  CHECK(vars["KOLO_CYCLE_TIME_MS"] == "5");
  CHECK(vars["KOLO_HIERARCHICAL"] == "off");
  CHECK(vars["KOLO_AUTOTUNE"] == "1");
  CHECK(vars["KOLO_AUTOTUNE_WARMUP_SAMPLES"] == "2");
  CHECK(vars["KOLO_TIMELINE"] == "t.json");
  CHECK(vars["KOLO_TIMELINE_MARK_CYCLES"] == "1");
  CHECK(vars["KOLO_STALL_CHECK_SECONDS"] == "120");
  CHECK(vars["KOLO_STALL_SHUTDOWN_SECONDS"] == "240");
  CHECK(vars["KOLO_TIMEOUT_SECONDS"] == "60");
  CHECK(vars["KOLO_LOG_LEVEL"] == "info");
  CHECK_THAT(run.err, Catch::Contains("kolorun: " + config + ":1: controller has no effect: "));

  WriteFile(config, "params:\n  fusion_threshold_mb: 16\n  fusion_treshold: 8\n");
  ProcessResult bad = RunProcess({KOLORUN_PATH, "-np", "1", "--config-file", config, "true"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err,
             Catch::Contains("kolorun: " + config + ":3: unknown key 'params.fusion_treshold'"));
}

TEST_CASE("kolorun -cb prints what this build has, in horovodrun's layout",
          "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("kolorun -cb", seconds(60));
  ProcessResult run = RunProcess({KOLORUN_PATH, "-cb"});  // no -np, no program: as horovodrun
  REQUIRE(run.exit_code == 0);
  for (const char* line :
       {"Available Frameworks:", "    [ ] MXNet", "Available Controllers:", "    [ ] MPI",
        "    [ ] Gloo", "    [X] gRPC", "Available Tensor Operations:", "    [X] TCP ring",
        "    [X] Shared memory"}) {
    CHECK_THAT(run.out, Catch::Contains(line));
  }
  CHECK_THAT(run.out, Catch::StartsWith("kolo v" KOLO_PROJECT_VERSION ":\n"));
  CHECK_THAT(run.out, Catch::Contains(KOLO_BUILT_WITH_NCCL ? "    [X] NCCL" : "    [ ] NCCL"));

  // The frameworks are the extensions next to the kolorun that runs: a build tree's python/
  // or an installation's site-packages.
  TempDir dir("kolorun-cb-");
  namespace fs = std::filesystem;
  fs::create_directories(dir.path() + "/bin");
  fs::copy_file(KOLORUN_PATH, dir.path() + "/bin/kolorun");
  REQUIRE(chmod((dir.path() + "/bin/kolorun").c_str(), 0755) == 0);
  ProcessResult bare = RunProcess({dir.path() + "/bin/kolorun", "--check-build"});
  CHECK_THAT(bare.out, Catch::Contains("    [ ] TensorFlow     not built (no kolo.tensorflow"));
  CHECK_THAT(bare.out, Catch::Contains("    [ ] PyTorch        not built (no kolo.torch"));
  const std::string torch = dir.path() + "/python/kolo/torch";
  const std::string tf = dir.path() + "/lib/python3.12/site-packages/kolo/tensorflow";
  fs::create_directories(torch);
  fs::create_directories(tf);
  WriteFile(torch + "/_C.cpython-312-x86_64-linux-gnu.so", "");
  WriteFile(tf + "/_kolo_ops.so", "");
  ProcessResult both = RunProcess({dir.path() + "/bin/kolorun", "-cb"});
  CHECK_THAT(both.out, Catch::Contains("    [X] PyTorch        kolo.torch: " + torch));
  CHECK_THAT(both.out, Catch::Contains("    [X] TensorFlow     kolo.tensorflow: " + tf));
}

TEST_CASE("kolorun -v prints kolo's version", "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("kolorun -v", seconds(30));
  for (const char* flag : {"-v", "--version"}) {
    ProcessResult run = RunProcess({KOLORUN_PATH, flag});
    CHECK(run.exit_code == 0);
    CHECK(run.out == KOLO_PROJECT_VERSION "\n");
  }
}

TEST_CASE("--output-filename writes each rank's output as horovodrun lays it out",
          "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("kolorun --output-filename", seconds(60));
  TempDir dir("kolorun-output-filename-");
  const std::string out = dir.path() + "/logs";
  ProcessResult run =
      RunProcess({KOLORUN_PATH, "-np", "11", "--bind-to", "none", "--output-filename", out,
                  "/bin/sh", "-c", "echo out $KOLO_RANK; echo err $KOLO_RANK >&2"});
  REQUIRE(run.exit_code == 0);
  CHECK(ReadFile(out + "/rank.00/stdout") == "out 0\n");
  CHECK(ReadFile(out + "/rank.03/stderr") == "err 3\n");
  CHECK(ReadFile(out + "/rank.10/stdout") == "out 10\n");
  CHECK_FALSE(std::filesystem::exists(out + "/rank.0.out"));
  CHECK_THAT(run.out, Catch::Contains("[10] out 10\n"));  // still forwarded
}

TEST_CASE("--prefix-output-with-timestamp starts each line with the time",
          "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("kolorun -prefix-timestamp", seconds(30));
  for (const char* flag : {"-prefix-timestamp", "--prefix-output-with-timestamp"}) {
    ProcessResult run =
        RunProcess({KOLORUN_PATH, "-np", "1", flag, "/bin/sh", "-c", "echo a; echo b >&2"});
    REQUIRE(run.exit_code == 0);
    // asctime's layout, then the rank's prefix, as horovodrun's "{time}[{rank}]<stdout>:".
    const std::string time = R"([A-Z][a-z]{2} [A-Z][a-z]{2} [ 1-3][0-9] \d\d:\d\d:\d\d \d{4})";
    CHECK(std::regex_match(run.out, std::regex(time + R"(\[0\] a\n)")));
    CHECK(std::regex_match(run.err, std::regex(time + R"(\[0\] b\n)")));
  }
}

TEST_CASE("kolorun --help lists kolo's options, then horovodrun's by its groups",
          "[tools][kolorun][horovodrun]") {
  Watchdog watchdog("kolorun --help", seconds(30));
  ProcessResult help = RunProcess({KOLORUN_PATH, "--help"});
  REQUIRE(help.exit_code == 0);
  size_t last = help.out.find("Options:");
  REQUIRE(last != std::string::npos);
  for (const char* group :
       {"horovodrun's options:", "horovodrun's SSH arguments:",
        "horovodrun's tuneable parameter arguments:", "horovodrun's autotune arguments:",
        "horovodrun's elastic arguments:", "horovodrun's timeline arguments:",
        "horovodrun's stall check arguments:", "horovodrun's library arguments:",
        "horovodrun's logging arguments:", "horovodrun's host arguments:",
        "horovodrun's controller arguments:"}) {
    const size_t at = help.out.find(group);
    CHECK(at != std::string::npos);
    CHECK(at > last);  // in horovodrun's order, after kolo's own
    last = at;
  }
  for (const HorovodOption& option : ReadHorovodOptions()) {
    for (const std::string& spelling : option.spellings) {
      INFO(spelling);
      CHECK(Mentions(help.out, spelling, " ,", " ,\n") == !option.hidden);
    }
  }
}

TEST_CASE("README's 'Coming from horovodrun' table lists every horovodrun option",
          "[tools][kolorun][horovodrun]") {
  const std::string readme = ReadFile(KOLO_README_PATH);
  const size_t start = readme.find("## Coming from horovodrun");
  REQUIRE(start != std::string::npos);
  const std::string section = readme.substr(start, readme.find("\n## ", start + 1) - start);
  for (const HorovodOption& option : ReadHorovodOptions()) {
    for (const std::string& spelling : option.spellings) {
      INFO(spelling);
      CHECK(Mentions(section, spelling, "`", "` ="));
    }
  }
}

}  // namespace
}  // namespace kolo::testing
