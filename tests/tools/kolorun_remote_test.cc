// End-to-end tests of kolorun's multi-host paths with the real binary: --dry-run, --output-dir,
// ranks started over "ssh" and a real 4-rank kolo job on two "hosts" through --launch-cmd.
// There is no sshd here, so --rsh points at a script that stands in for ssh: it records its
// arguments and runs the remote command with /bin/sh in a new session (out of kolorun's process
// group, as on another host), so that stopping a remote rank must go through the ssh process
// and its stdin exactly as with real ssh. Each test arms a watchdog.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"
#include "tests/tools/kolorun_output.h"

namespace kolo::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  REQUIRE(chmod(path.c_str(), mode) == 0);
}

// The stand-in for ssh: logs its arguments to $FAKE_SSH_LOG/ssh.<pid>, then runs the last
// argument (the remote command line) as a remote login shell would, in a new session.
std::string WriteFakeSsh(const TempDir& dir) {
  const std::string path = dir.path() + "/fake-ssh";
  WriteFile(path,
            "#!/bin/sh\n"
            "printf '%s\\n' \"$@\" > \"$FAKE_SSH_LOG/ssh.$$\"\n"
            "for last; do :; done\n"
            "exec setsid -w /bin/sh -c \"$last\"\n",
            0755);
  return path;
}

// Whether `pid` is gone (or a zombie nobody has reaped yet).
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

// Polls until every pid is gone or `limit` passes; returns those still alive.
std::vector<pid_t> AwaitGone(const std::vector<pid_t>& pids, milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::vector<pid_t> alive;
    for (pid_t pid : pids) {
      if (!ProcessGone(pid)) alive.push_back(pid);
    }
    if (alive.empty() || std::chrono::steady_clock::now() >= deadline) return alive;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

TEST_CASE("kolorun --dry-run prints each rank's host, command and environment, starts nothing",
          "[tools][kolorun]") {
  Watchdog watchdog("kolorun --dry-run", seconds(30));
  TempDir dir("kolorun-remote-");
  const std::string marker = dir.path() + "/started";
  ProcessResult run =
      RunProcess({KOLORUN_PATH, "--dry-run", "-H", "localhost:1,far1:2", "-p", "2200",
                  "--start-timeout", "9", "/bin/sh", "-c", "touch " + marker});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(access(marker.c_str(), F_OK) != 0);
  CHECK_THAT(run.out, Catch::Contains("rank 0: host localhost, started locally\n"
                                      "  command: /bin/sh -c 'touch " +
                                      marker + "'\n  env: KOLO_RANK=0\n"));
  CHECK_THAT(run.out, Catch::Contains("rank 2: host far1, started over ssh\n"
                                      "  command: ssh -o BatchMode=yes -p 2200 -- far1 "));
  std::smatch controller;
  REQUIRE(std::regex_search(run.out, controller, std::regex("env: KOLO_CONTROLLER=(.*):\\d+")));
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  CHECK(controller[1] == host);  // remote ranks cannot reach 127.0.0.1
  CHECK(CountOccurrences(run.out, "env: KOLO_START_TIMEOUT_SECONDS=9\n") == 3);
  CHECK(CountOccurrences(run.out, "env: KOLO_SECRET=(a fresh 64-hex-digit job secret") == 3);
  CHECK_FALSE(std::regex_search(run.out, std::regex("[0-9a-f]{64}")));
}

TEST_CASE("kolorun --output-dir writes each rank's raw output to its own files",
          "[tools][kolorun]") {
  Watchdog watchdog("kolorun --output-dir", seconds(30));
  TempDir dir("kolorun-remote-");
  const std::string out_dir = dir.path() + "/logs/job1";
  ProcessResult run = RunProcess({KOLORUN_PATH, "-np", "2", "--output-dir", out_dir, "/bin/sh",
                                  "-c", "echo out$KOLO_RANK; printf 'err%s' $KOLO_RANK >&2"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  for (int r = 0; r < 2; ++r) {
    const std::string base = out_dir + "/rank." + std::to_string(r);
    CHECK(ReadFile(base + ".out") == "out" + std::to_string(r) + "\n");
    CHECK(ReadFile(base + ".err") == "err" + std::to_string(r));
    CHECK_THAT(run.out, Catch::Contains("[" + std::to_string(r) + "] out"));  // and prefixed
  }
}

TEST_CASE("kolorun starts remote ranks over ssh with the secret on stdin, not on a command line",
          "[tools][kolorun]") {
  Watchdog watchdog("kolorun over ssh", seconds(60));
  TempDir dir("kolorun-remote-");
  const std::string ssh = WriteFakeSsh(dir);
  ProcessResult run = RunProcess(
      {KOLORUN_PATH, "-H", "fakeA:2,fakeB:1", "--rsh", ssh, "-x", "EXTRA_FOR_RANKS", "/bin/sh",
       "-c",
       "env | grep -E '^(KOLO_|EXTRA_)'; echo PWD=$(pwd); cat /proc/$$/cmdline | tr '\\0' ' '"},
      {"FAKE_SSH_LOG=" + dir.path(), "EXTRA_FOR_RANKS=yes", "KOLO_LOG_LEVEL=error"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  char cwd[4096];
  REQUIRE(getcwd(cwd, sizeof(cwd)) != nullptr);
  std::set<std::string> secrets;
  const char* hosts[] = {"fakeA", "fakeA", "fakeB"};
  for (int r = 0; r < 3; ++r) {
    auto vars = VariablesOfRank(run.out, r);
    INFO("rank " << r);
    CHECK(vars["KOLO_RANK"] == std::to_string(r));
    CHECK(vars["KOLO_SIZE"] == "3");
    CHECK(vars["KOLO_LOCAL_RANK"] == (r == 1 ? "1" : "0"));
    CHECK(vars["KOLO_LOCAL_SIZE"] == (r == 2 ? "1" : "2"));
    CHECK(vars["KOLO_HOSTNAME"] == hosts[r]);
    CHECK(std::regex_match(vars["KOLO_CONTROLLER"], std::regex("fakeA:[1-9][0-9]*")));
    CHECK(vars["KOLO_LOG_LEVEL"] == "error");
    CHECK(vars["EXTRA_FOR_RANKS"] == "yes");
    CHECK(vars["PWD"] == cwd);
    CHECK(std::regex_match(vars["KOLO_SECRET"], std::regex("[0-9a-f]{64}")));
    secrets.insert(vars["KOLO_SECRET"]);
  }
  REQUIRE(secrets.size() == 1);
  const std::string& secret = *secrets.begin();
  // Not on the rank's command line, nor on ssh's.
  CHECK(CountOccurrences(run.out, secret) == 3);
  int logs = 0;
  for (const std::string& name : SplitLines(RunProcess({"ls", dir.path()}).out)) {
    if (name.rfind("ssh.", 0) != 0) continue;
    ++logs;
    std::string argv = ReadFile(dir.path() + "/" + name);
    CHECK_THAT(argv, Catch::StartsWith("-o\nBatchMode=yes\n--\nfake"));
    CHECK(argv.find(secret) == std::string::npos);
  }
  CHECK(logs == 3);
}

// Starts a 2-rank job on two fake remote hosts whose ranks record their pids and sleep; returns
// the pids once both are running.
std::vector<pid_t> RankPids(const ChildProcess& job, const TempDir& dir) {
  REQUIRE(job.WaitForOutput("running", 2, milliseconds(30000)));
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    pids.push_back(std::stoi(ReadFile(dir.path() + "/pid." + std::to_string(r))));
  }
  return pids;
}

TEST_CASE("kolorun stops remote ranks when another rank fails", "[tools][kolorun]") {
  Watchdog watchdog("kolorun stops remote ranks", seconds(60));
  TempDir dir("kolorun-remote-");
  const std::string ssh = WriteFakeSsh(dir);
  // Rank 1 waits until rank 0 has said it runs, so that rank 0 is surely started.
  const std::string script =
      "echo $$ > \"$FAKE_SSH_LOG/pid.$KOLO_RANK\"; echo running; "
      "if [ \"$KOLO_RANK\" = 1 ]; then i=0; while [ ! -s \"$FAKE_SSH_LOG/pid.0\" ] && "
      "[ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; exit 3; fi; exec sleep 60";
  ChildProcess job({KOLORUN_PATH, "-H", "fakeA:1,fakeB:1", "--rsh", ssh, "/bin/sh", "-c", script},
                   {"FAKE_SSH_LOG=" + dir.path()});
  ProcessResult run = job.Wait();
  INFO(run.out << run.err);
  CHECK(run.exit_code == 3);
  CHECK_THAT(run.err, Catch::Contains("rank 1 exited with code 3"));
  CHECK(run.seconds < 20);
  pid_t rank0 = std::stoi(ReadFile(dir.path() + "/pid.0"));
  CHECK(AwaitGone({rank0}, milliseconds(20000)).empty());
}

TEST_CASE("remote ranks stop when kolorun itself is killed", "[tools][kolorun]") {
  Watchdog watchdog("remote ranks outlive kolorun", seconds(60));
  TempDir dir("kolorun-remote-");
  const std::string ssh = WriteFakeSsh(dir);
  ChildProcess job({KOLORUN_PATH, "-H", "fakeA:1,fakeB:1", "--rsh", ssh, "/bin/sh", "-c",
                    "echo $$ > \"$FAKE_SSH_LOG/pid.$KOLO_RANK\"; echo running; exec sleep 60"},
                   {"FAKE_SSH_LOG=" + dir.path()});
  std::vector<pid_t> pids = RankPids(job, dir);
  REQUIRE(kill(job.pid(), SIGKILL) == 0);
  job.Wait();
  // Its stdin pipes closed with it: each remote script saw end of file and stopped its rank.
  CHECK(AwaitGone(pids, milliseconds(20000)).empty());
}

TEST_CASE("a 4-rank kolo job on two hosts through --launch-cmd gets local and cross ranks",
          "[tools][kolorun][multirank]") {
  Watchdog watchdog("kolorun two hosts on loopback", seconds(120));
  // Both "hosts" are this one; KOLO_HOSTNAME (set by kolorun from the host list) makes the
  // runtime group the ranks by the names given.
  ProcessResult run = RunProcess(
      {KOLORUN_PATH, "-H", "hostA=127.0.0.1:2,hostB=127.0.0.1:2", "--launch-cmd", "env",
       "--start-timeout", "60", KOLO_BENCH_PATH, "-b", "64K", "-e", "64K", "-n", "2", "-w", "1"},
      {"KOLO_LOG_LEVEL=info"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::Contains("# Wrong elements     : 0 OK"));
  const std::regex ready(R"(\[(\d)\] .*rank (\d) of 4 ready \(local (\d)/2, cross (\d)/2\))");
  std::set<int> seen;
  for (const std::string& line : SplitLines(run.err)) {
    std::smatch m;
    if (!std::regex_search(line, m, ready)) continue;
    int rank = std::stoi(m[1]);
    CHECK(std::stoi(m[2]) == rank);
    CHECK(std::stoi(m[3]) == rank % 2);
    CHECK(std::stoi(m[4]) == rank / 2);
    seen.insert(rank);
  }
  CHECK(seen == std::set<int>{0, 1, 2, 3});
}

}  // namespace
}  // namespace kolo::testing
