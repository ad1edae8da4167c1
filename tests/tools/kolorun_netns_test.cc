// Simulated multi-host run of the real kolorun and kolo-bench: two network namespaces joined by
// a veth pair stand in for two hosts, and `kolorun -H nsA=ADDR:2,nsB=ADDR:2 --launch-cmd 'ip
// netns exec {host}'` runs 2 ranks in each. Checks local and cross ranks, that every rank's data
// port is bound to its namespace's veth address, and exact results; then shapes the link with
// tc (netem delay 2ms rate 200mbit, or tbf rate 200mbit where the kernel lacks netem) and
// checks that the job still completes with a bus bandwidth below the link rate.
// Needs root (CAP_NET_ADMIN) and iproute2; exits with kSkipCode (ctest: skipped) and a message
// where namespaces cannot be made. Namespaces are deleted at the end even when a check fails,
// and leftovers of killed earlier runs are deleted at the start.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/watchdog.h"

namespace kolo::testing {
namespace {

using std::chrono::seconds;

constexpr int kSkipCode = 77;  // SKIP_RETURN_CODE in CMakeLists.txt
constexpr char kNamePrefix[] = "kolo-t";
const char* const kAddress[2] = {"10.213.7.1", "10.213.7.2"};
constexpr double kLinkGBps = 200e6 / 8 / 1e9;  // 200 Mbit/s in kolo-bench's GB/s

ProcessResult Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv);
}

// Deletes namespaces this test left behind in runs that were killed (their pid is gone).
void DeleteStaleNamespaces() {
  const std::regex ours(std::string(kNamePrefix) + R"((\d+)-[ab])");
  for (const std::string& line : SplitLines(Ip({"netns", "list"}).out)) {
    std::smatch m;
    std::string name = line.substr(0, line.find(' '));
    if (std::regex_match(name, m, ours) && kill(std::stoi(m[1]), 0) != 0) {
      Ip({"netns", "del", name});
    }
  }
}

// Two namespaces, "kolo-t<pid>-a" and "-b", with loopback up and a veth pair between them
// addressed kAddress[0] and kAddress[1] (/24). The destructor deletes both (which deletes the
// veth pair).
class NamespacePair {
 public:
  NamespacePair() {
    const std::string id = std::to_string(getpid());
    for (int i = 0; i < 2; ++i) {
      names_[i] = kNamePrefix + id + (i == 0 ? "-a" : "-b");
      veths_[i] = "kv" + id + (i == 0 ? "a" : "b");
    }
  }
  ~NamespacePair() {
    for (const std::string& name : created_) Ip({"netns", "del", name});
  }

  // Creates the first namespace; false (with the reason) if this machine does not allow it.
  bool TryCreate(std::string* why) {
    ProcessResult made = Ip({"netns", "add", names_[0]});
    if (made.exit_code != 0) {
      *why = "'ip netns add' exited with " + std::to_string(made.exit_code) + ": " + made.err;
      return false;
    }
    created_.push_back(names_[0]);
    return true;
  }

  // The rest of the setup; returns the first failing command's error.
  std::string Finish() {
    if (std::string e = Run({"netns", "add", names_[1]}); !e.empty()) return e;
    created_.push_back(names_[1]);
    const std::vector<std::vector<std::string>> steps = {
        {"link", "add", veths_[0], "type", "veth", "peer", "name", veths_[1]},
        {"link", "set", veths_[0], "netns", names_[0]},
        {"link", "set", veths_[1], "netns", names_[1]},
        {"-n", names_[0], "addr", "add", std::string(kAddress[0]) + "/24", "dev", veths_[0]},
        {"-n", names_[1], "addr", "add", std::string(kAddress[1]) + "/24", "dev", veths_[1]},
        {"-n", names_[0], "link", "set", veths_[0], "up"},
        {"-n", names_[1], "link", "set", veths_[1], "up"},
        {"-n", names_[0], "link", "set", "lo", "up"},
        {"-n", names_[1], "link", "set", "lo", "up"},
    };
    for (const auto& step : steps) {
      if (std::string e = Run(step); !e.empty()) return e;
    }
    return "";
  }

  // Adds `qdisc` (tc words) as the root qdisc of both veth ends; returns tc's error.
  std::string Shape(const std::vector<std::string>& qdisc) {
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> argv = {"ip",    "netns", "exec", names_[i], "tc",
                                       "qdisc", "add",   "dev",  veths_[i], "root"};
      argv.insert(argv.end(), qdisc.begin(), qdisc.end());
      ProcessResult tc = RunProcess(argv);
      if (tc.exit_code != 0) return tc.err.empty() ? "tc failed" : tc.err;
    }
    return "";
  }

  const std::string& name(int i) const { return names_[i]; }

 private:
  static std::string Run(const std::vector<std::string>& args) {
    ProcessResult r = Ip(args);
    if (r.exit_code == 0) return "";
    std::string command = "ip";
    for (const std::string& a : args) command += " " + a;
    return command + ": " + r.err;
  }

  std::string names_[2];
  std::string veths_[2];
  std::vector<std::string> created_;
};

ProcessResult RunBenchAcross(const NamespacePair& pair, const std::vector<std::string>& flags,
                             const std::vector<std::string>& env) {
  const std::string hosts =
      pair.name(0) + "=" + kAddress[0] + ":2," + pair.name(1) + "=" + kAddress[1] + ":2";
  std::vector<std::string> argv = {
      KOLORUN_PATH,      "-H", hosts,          "--launch-cmd", "ip netns exec {host}",
      "--start-timeout", "60", KOLO_BENCH_PATH};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return RunProcess(argv, env);
}

// Rank 0's allreduce bus bandwidth (GB/s) on the last result row of kolo-bench's table,
// computed from the exact size and time columns (the printed busbw has two decimals, too coarse
// for a 0.025 GB/s link): bytes / time · 2(n−1)/n.
double LastBusBandwidth(const std::string& out, int ranks) {
  static const std::regex row(
      R"(\[0\] +(\d+) +\d+ +\w+ +\w+ +-?\d+ +([\d.]+) +[\d.]+ +[\d.]+ +\S+)");
  double busbw = -1;
  for (const std::string& line : SplitLines(out)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    double bytes = std::stod(m[1]), time_us = std::stod(m[2]);
    if (time_us > 0) busbw = bytes / time_us / 1e3 * 2.0 * (ranks - 1) / ranks;
  }
  return busbw;
}

TEST_CASE("kolorun runs 2 hosts x 2 ranks in network namespaces, also over a slow link",
          "[tools][kolorun][netns][multirank]") {
  DeleteStaleNamespaces();
  NamespacePair pair;
  std::string why;
  if (!pair.TryCreate(&why)) {
    std::fprintf(stderr,
                 "SKIP: cannot create network namespaces here (needs root or CAP_NET_ADMIN and "
                 "iproute2): %s\n",
                 why.c_str());
    std::fflush(stderr);
    std::_Exit(kSkipCode);
  }
  Watchdog watchdog("kolorun in network namespaces", seconds(240));
  std::string setup = pair.Finish();
  INFO(setup);
  REQUIRE(setup.empty());

  SECTION("ranks get local and cross ranks and bind to their namespace's address") {
    ProcessResult run = RunBenchAcross(pair, {"-b", "1M", "-e", "1M", "-n", "3", "-w", "1"},
                                       {"KOLO_LOG_LEVEL=debug"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Catch::Contains("# Wrong elements     : 0 OK"));
    const std::regex ready(R"(\[(\d)\] .*rank (\d) of 4 ready \(local (\d)/2, cross (\d)/2\), )"
                           R"(controller ([\d.]+):\d+)");
    const std::regex listening(R"(\[(\d)\] .*data mesh listening on ([\d.]+):\d+)");
    std::set<int> ready_ranks, bound_ranks;
    for (const std::string& line : SplitLines(run.err)) {
      std::smatch m;
      if (std::regex_search(line, m, ready)) {
        int rank = std::stoi(m[1]);
        INFO(line);
        CHECK(std::stoi(m[2]) == rank);
        CHECK(std::stoi(m[3]) == rank % 2);
        CHECK(std::stoi(m[4]) == rank / 2);
        CHECK(m[5] == kAddress[0]);
        ready_ranks.insert(rank);
      } else if (std::regex_search(line, m, listening)) {
        int rank = std::stoi(m[1]);
        INFO(line);
        CHECK(m[2] == kAddress[rank / 2]);
        bound_ranks.insert(rank);
      }
    }
    CHECK(ready_ranks == std::set<int>{0, 1, 2, 3});
    CHECK(bound_ranks == std::set<int>{0, 1, 2, 3});
  }

  SECTION("over a 200 Mbit/s link the job completes below the link rate") {
    std::string shaped = pair.Shape({"netem", "delay", "2ms", "rate", "200mbit"});
    if (!shaped.empty()) {
      WARN("netem is not available here (" << shaped
                                           << "); shaping with tbf, without the 2 ms delay");
      shaped = pair.Shape({"tbf", "rate", "200mbit", "burst", "32kb", "latency", "100ms"});
    }
    INFO(shaped);
    REQUIRE(shaped.empty());
    // The flat ring sends 2(n-1)/n of the bytes across each host's link, which is what the
    // bus bandwidth counts; the hierarchical allreduce (docs/SCALE.md) sends 2(H-1)/H of them,
    // here 1 instead of 1.5, so its bus bandwidth may reach 1.5 times the link's.
    for (const char* mode : {"off", "on"}) {
      ProcessResult run = RunBenchAcross(pair, {"-b", "4M", "-e", "4M", "-n", "3", "-w", "1"},
                                         {std::string("KOLO_HIERARCHICAL=") + mode});
      INFO("KOLO_HIERARCHICAL=" << mode << "\n" << run.out << run.err);
      REQUIRE(run.exit_code == 0);
      CHECK_THAT(run.out, Catch::Contains("# Wrong elements     : 0 OK"));
      double busbw = LastBusBandwidth(run.out, 4);
      INFO("busbw " << busbw << " GB/s, link " << kLinkGBps << " GB/s");
      CHECK(busbw > 0);
      CHECK(busbw < (std::string(mode) == "off" ? 1.0 : 1.5) * kLinkGBps);
    }
  }
}

}  // namespace
}  // namespace kolo::testing
