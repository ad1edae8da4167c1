// Elastic jobs end to end (docs/ELASTIC.md): the real kolorun in elastic mode, its discovery
// script reading a hosts file the test edits, and kolo-elastic-train workers (the C++ elastic
// loop) on loopback "hosts" (localhost, 127.0.0.2, ...: local, each its own host). A worker is
// SIGKILLed mid-run; the survivors must re-form within the recovery bound and finish with the
// weights a one-rank run computes; a host added to the file must join; too few workers must end
// the job with the reason. Every test arms a Watchdog.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "tests/support/child_process.h"
#include "tests/support/seconds_since.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"

namespace kolo::testing {
namespace {

using namespace std::chrono_literals;

void WriteHosts(const TempDir& dir, const std::string& text) {
  std::ofstream(dir.File("hosts.txt")) << text;
}

std::vector<std::string> ElasticJob(const TempDir& dir, int np, int min_np, int max_np,
                                    const std::vector<std::string>& extra,
                                    const std::string& steps) {
  std::vector<std::string> argv = {KOLORUN_PATH,
                                   "-np",
                                   std::to_string(np),
                                   "--min-np",
                                   std::to_string(min_np),
                                   "--max-np",
                                   std::to_string(max_np),
                                   "--host-discovery-script",
                                   "cat " + dir.File("hosts.txt"),
                                   "--start-timeout",
                                   "20"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  for (const char* arg : {KOLO_ELASTIC_TRAIN_PATH, "--steps", steps.c_str(), "--step-ms", "10"}) {
    argv.push_back(arg);
  }
  return argv;
}

// The pid worker `id` printed for `generation`.
int PidOf(const std::string& out, const std::string& id, int generation) {
  std::smatch match;
  const std::regex line("\\[" + std::regex_replace(id, std::regex("\\."), "\\.") +
                        "\\] generation " + std::to_string(generation) +
                        " rank \\d+ of \\d+ pid (\\d+)");
  if (!std::regex_search(out, match, line)) return -1;
  return std::stoi(match[1]);
}

// SIGKILLs worker `id` of generation 1 (the pid it printed).
void KillWorker(const ChildProcess& job, const std::string& id) {
  const int pid = PidOf(job.StdoutSoFar(), id, 1);
  REQUIRE(pid > 0);
  REQUIRE(kill(pid, SIGKILL) == 0);
}

// The weights a one-rank run of kolo-elastic-train reaches after `steps` steps, as it prints them.
std::string OneRankWeights(int steps) {
  float weight = 0.0f;
  for (int i = 0; i < steps; ++i) weight -= 0.01f * 1.0f;
  char text[64];
  std::snprintf(text, sizeof(text), "done steps %d weights %.6f", steps,
                static_cast<double>(weight));
  return text;
}

// Every worker's "done ..." line: the same on each, with the one-rank weights.
void CheckDoneLines(const std::string& out, int ranks, int steps) {
  std::set<std::string> done;
  for (const std::string& line : SplitLines(out)) {
    const size_t at = line.find("] done steps");
    if (at != std::string::npos) done.insert(line.substr(at + 2));
  }
  CHECK(CountOccurrences(out, "] done steps") == ranks);
  REQUIRE(done.size() == 1);
  CHECK(done.begin()->rfind(OneRankWeights(steps), 0) == 0);
}

TEST_CASE("An elastic job survives a SIGKILLed rank and grows back when a host appears",
          "[tools][elastic][fault]") {
  Watchdog watchdog("elastic kill and grow", 120s);
  TempDir dir;
  WriteHosts(dir, "localhost:2\n127.0.0.2:1\n127.0.0.3:1\n");
  ChildProcess job(ElasticJob(dir, 4, 2, 4, {}, "500"));
  REQUIRE(job.WaitForOutput("commit step 20 size 4", 4, 60s));
  const auto killed = std::chrono::steady_clock::now();
  KillWorker(job, "127.0.0.3:0");
  // The survivors: renumbered into generation 2 of 3 ranks, training again.
  REQUIRE(job.WaitForOutput("generation 2 rank", 3, 30s));
  const double recovery = SecondsSince(killed);
  REQUIRE(job.WaitForOutput("size 3", 3, 30s));
  CHECK(recovery < 3.0);  // the bound: 3 s plus the (millisecond) detection
  WARN("SIGKILL to generation 2 on the survivors: " << recovery << " s");

  WriteHosts(dir, "localhost:2\n127.0.0.2:1\n127.0.0.3:1\n127.0.0.4:1\n");
  const auto added = std::chrono::steady_clock::now();
  REQUIRE(job.WaitForOutput("generation 3 rank", 4, 30s));
  WARN("host added to its rank in generation 3: " << SecondsSince(added) << " s");
  CHECK(job.StdoutSoFar().find("[127.0.0.4:0] generation 3 rank 3 of 4") != std::string::npos);
  ProcessResult result = job.Wait();
  CHECK(result.exit_code == 0);
  CHECK(result.err.find("kolorun: worker 127.0.0.3:0 was killed by signal 9 (Killed)") !=
        std::string::npos);
  CheckDoneLines(result.out, 4, 500);
}

TEST_CASE("When rank 0's worker is lost the survivors re-form under a new rank 0",
          "[tools][elastic][fault]") {
  Watchdog watchdog("elastic rank 0 lost", 120s);
  TempDir dir;
  WriteHosts(dir, "localhost:1\n127.0.0.2:1\n127.0.0.3:1\n");
  ChildProcess job(ElasticJob(dir, 3, 2, 3, {}, "300"));
  REQUIRE(job.WaitForOutput("commit step 20 size 3", 3, 60s));
  KillWorker(job, "localhost:0");
  REQUIRE(job.WaitForOutput("generation 2 rank", 2, 30s));
  CHECK(job.StdoutSoFar().find("[127.0.0.2:0] generation 2 rank 0 of 2") != std::string::npos);
  ProcessResult result = job.Wait();
  CHECK(result.exit_code == 0);
  CheckDoneLines(result.out, 2, 300);
}

TEST_CASE("A second worker lost while the survivors re-form costs no start timeout",
          "[tools][elastic][fault]") {
  Watchdog watchdog("elastic double loss", 120s);
  TempDir dir;
  WriteHosts(dir, "localhost:1\n127.0.0.2:1\n127.0.0.3:1\n127.0.0.4:1\n127.0.0.5:1\n");
  // A start timeout far above the bound below: a start that waited it out would fail the check.
  std::vector<std::string> argv = ElasticJob(dir, 5, 2, 5, {}, "400");
  argv[std::find(argv.begin(), argv.end(), "--start-timeout") - argv.begin() + 1] = "60";
  ChildProcess job(argv);
  REQUIRE(job.WaitForOutput("commit step 20 size 5", 5, 60s));
  const auto killed = std::chrono::steady_clock::now();
  KillWorker(job, "127.0.0.3:0");
  std::this_thread::sleep_for(15ms);  // the survivors are re-forming (or about to)
  KillWorker(job, "127.0.0.4:0");
  REQUIRE(job.WaitForOutput("size 3", 3, 60s));
  const double recovery = SecondsSince(killed);
  WARN("two SIGKILLs 15 ms apart to training on the last 3: " << recovery << " s");
  CHECK(recovery < 5.0);
  ProcessResult result = job.Wait();
  CHECK(result.exit_code == 0);
  CheckDoneLines(result.out, 3, 400);
}

TEST_CASE("Fewer workers than --min-np for --elastic-timeout ends the job with the reason",
          "[tools][elastic][fault]") {
  Watchdog watchdog("elastic min-np", 120s);
  TempDir dir;
  WriteHosts(dir, "localhost:1\n127.0.0.2:1\n");
  ChildProcess job(ElasticJob(dir, 2, 2, 2, {"--elastic-timeout", "2"}, "100000"));
  REQUIRE(job.WaitForOutput("commit step 10 size 2", 2, 60s));
  const auto killed = std::chrono::steady_clock::now();
  KillWorker(job, "127.0.0.2:0");
  ProcessResult result = job.Wait();
  CHECK(result.exit_code == 1);
  CHECK(result.err.find("kolorun: the elastic job cannot go on: only 1 worker(s) for 2 s "
                        "(--elastic-timeout), fewer than --min-np 2; stopping every worker") !=
        std::string::npos);
  CHECK(SecondsSince(killed) < 15);  // 2 s, the stop's grace, and a loaded machine
}

}  // namespace
}  // namespace kolo::testing
