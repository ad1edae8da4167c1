// End-to-end tests of the kolorun binary: real processes (/bin/sh scripts as ranks), real
// pipes and real signals. Each test arms a watchdog; timing bounds are generous for a loaded CI
// machine yet far below the 60 s sleeps that a missing kill would leave behind.
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"
#include "tests/tools/kolorun_output.h"

namespace kolo::testing {
namespace {

using std::chrono::seconds;

ProcessResult RunRanks(int n, const std::string& script) {
  return RunProcess({KOLORUN_PATH, "-np", std::to_string(n), "/bin/sh", "-c", script});
}

TEST_CASE("kolorun gives every rank its identity and one shared secret by environment",
          "[tools][kolorun]") {
  Watchdog watchdog("kolorun identity", seconds(30));
  ProcessResult run = RunRanks(4, "env | grep '^KOLO_'");
  REQUIRE(run.exit_code == 0);
  std::set<std::string> secrets, job_ids, controllers;
  for (int r = 0; r < 4; ++r) {
    auto vars = VariablesOfRank(run.out, r);
    CHECK(vars["KOLO_RANK"] == std::to_string(r));
    CHECK(vars["KOLO_SIZE"] == "4");
    CHECK(vars["KOLO_LOCAL_RANK"] == std::to_string(r));
    CHECK(vars["KOLO_LOCAL_SIZE"] == "4");
    CHECK(std::regex_match(vars["KOLO_CONTROLLER"], std::regex(R"(127\.0\.0\.1:[1-9][0-9]*)")));
    CHECK(std::regex_match(vars["KOLO_SECRET"], std::regex("[0-9a-f]{64}")));
    CHECK(std::regex_match(vars["KOLO_JOB_ID"], std::regex("kolorun-[0-9a-f]{16}")));
    secrets.insert(vars["KOLO_SECRET"]);
    job_ids.insert(vars["KOLO_JOB_ID"]);
    controllers.insert(vars["KOLO_CONTROLLER"]);
  }
  CHECK(secrets.size() == 1);
  CHECK(job_ids.size() == 1);
  CHECK(controllers.size() == 1);

  ProcessResult again = RunRanks(1, "echo $KOLO_SECRET");
  REQUIRE(again.exit_code == 0);
  CHECK(again.out != "[0] " + *secrets.begin() + "\n");  // fresh per job
}

// The CPUs this process may run on.
int AllowedCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

// Each rank's "Cpus_allowed_list" from /proc/self/status, by rank.
std::map<int, std::string> AllowedCpuLists(const std::string& out) {
  std::map<int, std::string> lists;
  const std::regex line(R"(\[(\d+)\] Cpus_allowed_list:\s*(\S+))");
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) {
    lists[std::stoi((*it)[1])] = (*it)[2];
  }
  return lists;
}

TEST_CASE("kolorun binds two local ranks to CPUs of their own, or not with --bind-to none",
          "[tools][kolorun]") {
  Watchdog watchdog("kolorun --bind-to", seconds(30));
  const std::string script = "grep Cpus_allowed_list /proc/self/status; echo bind=$KOLO_CPU_BIND";
  ProcessResult own = RunProcess({KOLORUN_PATH, "-np", "1", "/bin/sh", "-c", script});
  REQUIRE(own.exit_code == 0);
  const std::string everything = AllowedCpuLists(own.out)[0];  // one rank: never bound
  CHECK_THAT(own.out, Catch::Contains("[0] bind=\n"));

  ProcessResult bound = RunRanks(2, script);
  REQUIRE(bound.exit_code == 0);
  std::map<int, std::string> lists = AllowedCpuLists(bound.out);
  REQUIRE(lists.size() == 2);
  if (AllowedCpuCount() >= 2) {
    CHECK(lists[0] != lists[1]);
    CHECK(lists[0] != everything);
    CHECK_THAT(bound.out, Catch::Contains("[0] bind=core") && Catch::Contains("[1] bind=core"));
  } else {
    WARN("one CPU: kolorun leaves the ranks unbound, which is what is checked");
    CHECK(lists[0] == everything);
  }

  ProcessResult unbound =
      RunProcess({KOLORUN_PATH, "--bind-to", "none", "-np", "2", "/bin/sh", "-c", script});
  REQUIRE(unbound.exit_code == 0);
  lists = AllowedCpuLists(unbound.out);
  CHECK(lists[0] == everything);
  CHECK(lists[1] == everything);
  CHECK_THAT(unbound.out, Catch::Contains("[0] bind=\n") && Catch::Contains("[1] bind=\n"));
}

// Issue 19, item 8: with KOLO_SECRET_FILE exported, every rank used to get both it and
// kolorun's KOLO_SECRET, and refused to start.
TEST_CASE("kolorun passes the user's KOLO_SECRET_FILE on as the job's secret", "[tools][kolorun]") {
  Watchdog watchdog("kolorun secret file", seconds(30));
  TempDir dir("kolorun-secret-");
  const std::string secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  const std::string path = dir.path() + "/secret";
  std::ofstream(path) << secret << "\n";
  REQUIRE(chmod(path.c_str(), 0600) == 0);
  ProcessResult run = RunProcess({KOLORUN_PATH, "-np", "2", "/bin/sh", "-c", "env | grep '^KOLO_'"},
                                 {"KOLO_SECRET_FILE=" + path});
  REQUIRE(run.exit_code == 0);
  for (int r = 0; r < 2; ++r) {
    auto vars = VariablesOfRank(run.out, r);
    CHECK(vars["KOLO_SECRET"] == secret);
    CHECK(vars.count("KOLO_SECRET_FILE") == 0);
  }
  // A file kolorun cannot use is a usage error that says why and what to do.
  ProcessResult missing = RunProcess({KOLORUN_PATH, "-np", "2", "true"},
                                     {"KOLO_SECRET_FILE=" + dir.path() + "/missing"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("kolorun: KOLO_SECRET_FILE='" + dir.path() +
                         "/missing' cannot be opened: ") != std::string::npos);
  CHECK(missing.err.find("unset KOLO_SECRET_FILE and kolorun makes a secret") != std::string::npos);
  REQUIRE(chmod(path.c_str(), 0644) == 0);
  ProcessResult readable =
      RunProcess({KOLORUN_PATH, "-np", "2", "true"}, {"KOLO_SECRET_FILE=" + path});
  CHECK(readable.exit_code == 2);
  CHECK(readable.err.find("has mode 0644") != std::string::npos);
}

// Issue 19, item 5: ranks outlived a SIGKILLed kolorun (reparented, running forever).
TEST_CASE("Ranks die with a SIGKILLed kolorun", "[tools][kolorun]") {
  Watchdog watchdog("kolorun parent death", seconds(30));
  ChildProcess kolorun({KOLORUN_PATH, "-np", "2", "/bin/sh", "-c", "echo pid $$; exec sleep 60"});
  REQUIRE(kolorun.WaitForOutput("pid ", 2, std::chrono::milliseconds(10000)));
  std::vector<pid_t> ranks;
  for (const std::string& line : SplitLines(kolorun.StdoutSoFar())) {
    const size_t at = line.find("pid ");
    if (at != std::string::npos) ranks.push_back(std::stoi(line.substr(at + 4)));
  }
  REQUIRE(ranks.size() == 2);
  kolorun.Signal(SIGKILL);
  kolorun.Wait();
  // Gone, or a zombie waiting for whoever adopted it: either way no longer running.
  auto running = [](pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) return false;
    const size_t close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
  };
  const auto until = std::chrono::steady_clock::now() + seconds(5);
  while ((running(ranks[0]) || running(ranks[1])) && std::chrono::steady_clock::now() < until) {
    usleep(10 * 1000);
  }
  CHECK_FALSE(running(ranks[0]));
  CHECK_FALSE(running(ranks[1]));
}

TEST_CASE("kolorun prefixes every line with its rank and never mixes ranks mid-line",
          "[tools][kolorun]") {
  Watchdog watchdog("kolorun line prefixes", seconds(60));
  // Each line is written in three pieces; the last line has no newline.
  const std::string script =
      "i=0; while [ $i -lt 200 ]; do printf 'r%s-' $KOLO_RANK; printf '%0300d' $i; "
      "echo \" end$KOLO_RANK\"; echo \"err$KOLO_RANK\" >&2; i=$((i+1)); done; "
      "printf 'tail%s' $KOLO_RANK";
  ProcessResult run = RunRanks(4, script);
  REQUIRE(run.exit_code == 0);
  std::map<int, int> lines_per_rank, tails;
  const std::regex line(R"(\[(\d)\] r(\d)-\d{300} end(\d))");
  const std::regex tail(R"(\[(\d)\] tail(\d))");
  for (const std::string& text : SplitLines(run.out)) {
    std::smatch m;
    if (std::regex_match(text, m, line) && m[1] == m[2] && m[1] == m[3]) {
      ++lines_per_rank[std::stoi(m[1])];
    } else if (std::regex_match(text, m, tail) && m[1] == m[2]) {
      ++tails[std::stoi(m[1])];
    } else {
      FAIL("malformed stdout line: " << text.substr(0, 120));
    }
  }
  for (int r = 0; r < 4; ++r) {
    CHECK(lines_per_rank[r] == 200);
    CHECK(tails[r] == 1);
    CHECK(CountOccurrences(run.err, "[" + std::to_string(r) + "] err" + std::to_string(r) + "\n") ==
          200);
  }
  CHECK(run.out.find("err") == std::string::npos);  // stderr stays on stderr
}

TEST_CASE("kolorun exits with the first failing rank's code and stops the others",
          "[tools][kolorun]") {
  Watchdog watchdog("kolorun failure propagation", seconds(30));
  ProcessResult run = RunRanks(4, "if [ $KOLO_RANK = 2 ]; then exit 3; fi; sleep 60");
  CHECK(run.exit_code == 3);
  CHECK(run.seconds < 10);
  CHECK(run.err.find("kolorun: rank 2 exited with code 3; stopping the other ranks") !=
        std::string::npos);
}

TEST_CASE("kolorun reports a rank killed by a signal as 128 + signal", "[tools][kolorun]") {
  Watchdog watchdog("kolorun killed rank", seconds(30));
  ProcessResult run = RunRanks(3, "if [ $KOLO_RANK = 1 ]; then kill -KILL $$; fi; sleep 60");
  CHECK(run.exit_code == 128 + SIGKILL);
  CHECK(run.seconds < 10);
  CHECK(run.err.find("kolorun: rank 1 was killed by signal 9") != std::string::npos);
}

TEST_CASE("kolorun SIGKILLs a rank that ignores SIGTERM after the grace period",
          "[tools][kolorun]") {
  Watchdog watchdog("kolorun kill escalation", seconds(30));
  // Rank 1 fails only once rank 0 certainly ignores SIGTERM (it has said so).
  ProcessResult run =
      RunRanks(2,
               "if [ $KOLO_RANK = 1 ]; then sleep 1; exit 5; fi; trap '' TERM; echo ignoring; "
               "sleep 60");
  CHECK(run.exit_code == 5);
  CHECK(run.out == "[0] ignoring\n");
  CHECK(run.seconds > 4);  // the 5 s grace, minus the scheduling slack of its start
  CHECK(run.seconds < 10);
}

TEST_CASE("kolorun forwards SIGTERM to every rank", "[tools][kolorun]") {
  Watchdog watchdog("kolorun signal forwarding", seconds(30));
  ChildProcess job({KOLORUN_PATH, "-np", "3", "/bin/sh", "-c",
                    "trap 'echo got TERM; exit 7' TERM; echo ready; "
                    "while :; do sleep 0.1; done"});
  REQUIRE(job.WaitForOutput("ready", 3, seconds(10)));
  kill(job.pid(), SIGTERM);
  ProcessResult run = job.Wait();
  CHECK(run.exit_code == 7);  // the first rank to fail, not kolorun's own 128 + 15
  CHECK(run.seconds < 10);
  for (int r = 0; r < 3; ++r) {
    CHECK(CountOccurrences(run.out, "[" + std::to_string(r) + "] got TERM\n") == 1);
  }
  CHECK(run.err.find("kolorun: received SIGTERM; forwarding it to all ranks") != std::string::npos);
}

TEST_CASE("kolorun exits 128 + signal when interrupted ranks all exit 0", "[tools][kolorun]") {
  Watchdog watchdog("kolorun interrupted", seconds(30));
  ChildProcess job({KOLORUN_PATH, "-np", "2", "/bin/sh", "-c",
                    "trap 'exit 0' INT; echo ready; while :; do sleep 0.1; done"});
  REQUIRE(job.WaitForOutput("ready", 2, seconds(10)));
  kill(job.pid(), SIGINT);
  ProcessResult run = job.Wait();
  CHECK(run.exit_code == 128 + SIGINT);
  CHECK(run.seconds < 10);
}

TEST_CASE("kolorun exits 0 when every rank exits 0, whenever each ends", "[tools][kolorun]") {
  Watchdog watchdog("kolorun success", seconds(30));
  ProcessResult run = RunRanks(3, "sleep 0.$KOLO_RANK; exit 0");
  CHECK(run.exit_code == 0);
  CHECK(run.err.empty());
}

TEST_CASE("kolorun names a program it cannot execute", "[tools][kolorun]") {
  Watchdog watchdog("kolorun exec failure", seconds(30));
  ProcessResult run = RunProcess({KOLORUN_PATH, "-np", "2", "/nonexistent/kolo-program", "x"});
  CHECK(run.exit_code == 127);
  CHECK(run.err.find("kolorun: cannot execute '/nonexistent/kolo-program': No such file or "
                     "directory") != std::string::npos);
  CHECK(run.seconds < 10);
}

TEST_CASE("kolorun rejects bad command lines with a usage error", "[tools][kolorun]") {
  Watchdog watchdog("kolorun usage errors", seconds(30));
  using Case = std::pair<std::vector<std::string>, std::string>;
  auto [args, message] =
      GENERATE(Case{{"-np", "0", "true"}, "-np must be an integer in [1, 1024], got '0'"},
               Case{{"-np", "1025", "true"}, "-np must be an integer in [1, 1024], got '1025'"},
               Case{{"-n", "two", "true"}, "-n must be an integer in [1, 1024], got 'two'"},
               Case{{"-np"}, "-np needs a value"}, Case{{"true"}, "missing -np N"},
               Case{{"-np", "2"}, "missing the program to run"},
               Case{{"--frobnicate", "true"}, "unknown option '--frobnicate'"});
  args.insert(args.begin(), KOLORUN_PATH);
  ProcessResult run = RunProcess(args);
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("kolorun: " + message) != std::string::npos);
}

TEST_CASE("kolorun --help and --help-env print and exit 0", "[tools][kolorun]") {
  Watchdog watchdog("kolorun help", seconds(30));
  ProcessResult help = RunProcess({KOLORUN_PATH, "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("Usage: kolorun -np N") != std::string::npos);
  ProcessResult env = RunProcess({KOLORUN_PATH, "--help-env"});
  CHECK(env.exit_code == 0);
  CHECK(env.out.find("KOLO_SECRET") != std::string::npos);
}

}  // namespace
}  // namespace kolo::testing
