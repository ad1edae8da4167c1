// The discovery script of an elastic job (launcher/host_discovery.h): its output parsed as
// Horovod's contract says, and the script run for real with /bin/sh, failing, hanging.
#include "launcher/host_discovery.h"

#include <signal.h>

#include <catch2/catch.hpp>

#include "launcher/launch_options.h"
#include "tests/support/watchdog.h"

namespace kolo::launcher {
namespace {

TEST_CASE("Discovered hosts are HOST[:SLOTS] lines, --slots where a line has none",
          "[tools][elastic]") {
  auto hosts = ParseDiscoveredHosts("node1:4\n\n  node2\nnode3=10.0.0.3:2\r\nnode1:2\n", 3);
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 3);
  CHECK((*hosts)[0].name == "node1");
  CHECK((*hosts)[0].slots == 6);  // listed twice: its slots add up, as in -H
  CHECK((*hosts)[1].slots == 3);
  CHECK((*hosts)[2].address == "10.0.0.3");
  CHECK(ParseDiscoveredHosts("", 1)->empty());
  auto bad = ParseDiscoveredHosts("node1:4\nnode2:x\n", 1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().rfind("line 2: ", 0) == 0);
  CHECK(ParseDiscoveredHosts("a:1,b:1", 1).status().message() ==
        "line 1 'a:1,b:1': one host a line, as HOST[:SLOTS]");
}

TEST_CASE("The discovery script runs through /bin/sh; a failure or a hang is an error naming it",
          "[tools][elastic]") {
  testing::Watchdog watchdog("discovery script", std::chrono::seconds(30));
  auto hosts = RunDiscoveryScript("printf 'h1:2\\nh2\\n'", 1, std::chrono::seconds(10));
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 2);
  CHECK((*hosts)[1].slots == 1);
  CHECK(RunDiscoveryScript("echo h1; exit 3", 1, std::chrono::seconds(10)).status().message() ==
        "--host-discovery-script 'echo h1; exit 3' exited with code 3");
  const auto start = std::chrono::steady_clock::now();
  auto hung = RunDiscoveryScript("sleep 30", 1, std::chrono::milliseconds(300));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(hung.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(hung.status().message() ==
        "--host-discovery-script 'sleep 30' did not finish within 300 ms (killed)");
}

TEST_CASE("A discovery run never blocks its caller; a hung one is killed at its deadline",
          "[tools][elastic]") {
  testing::Watchdog watchdog("discovery run", std::chrono::seconds(30));
  StatusOr<std::unique_ptr<DiscoveryRun>> run =
      DiscoveryRun::Start("sleep 30", 1, std::chrono::milliseconds(300));
  REQUIRE(run.ok());
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE((*run)->Check(start).has_value());  // running: no answer, and no wait
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(100));
  const pid_t pid = (*run)->pid();
  auto result = (*run)->Check(start + std::chrono::milliseconds(300));  // its deadline
  REQUIRE(result.has_value());
  CHECK(result->status().code() == StatusCode::kDeadlineExceeded);
  CHECK(result->status().message() ==
        "--host-discovery-script 'sleep 30' did not finish within 300 ms (killed)");
  CHECK(kill(pid, 0) != 0);                                                 // killed and reaped
  CHECK_FALSE((*run)->Check(start + std::chrono::seconds(1)).has_value());  // told once
}

TEST_CASE("A script is done when it exits, even if something it started holds its stdout",
          "[tools][elastic]") {
  testing::Watchdog watchdog("discovery leftover", std::chrono::seconds(30));
  const auto start = std::chrono::steady_clock::now();
  auto hosts = RunDiscoveryScript("sleep 30 & echo h1:2", 1, std::chrono::seconds(10));
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 1);
  CHECK((*hosts)[0].slots == 2);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));  // not the 10 s
}

TEST_CASE("kolorun's elastic options: hosts from a script or a list, min <= np <= max",
          "[tools][elastic]") {
  auto options =
      ParseLaunchOptions({"-np", "4", "--min-np", "2", "--max-np", "8", "--host-discovery-script",
                          "./hosts.sh", "--slots", "2", "--elastic-timeout", "30", "--reset-limit",
                          "3", "--blacklist-cooldown-range", "10", "100", "prog"});
  REQUIRE(options.ok());
  CHECK(options->elastic.enabled);
  CHECK(options->elastic.min_np == 2);
  CHECK(options->elastic.max_np == 8);
  CHECK(options->elastic.slots == 2);
  CHECK(options->elastic.timeout_seconds == 30);
  CHECK(options->elastic.reset_limit == 3);
  CHECK(options->elastic.cooldown_min_seconds == 10);
  CHECK(options->elastic.cooldown_max_seconds == 100);
  CHECK(options->command == std::vector<std::string>{"prog"});

  auto static_hosts = ParseLaunchOptions({"--min-np", "2", "-H", "a:2,b:2", "prog"});
  REQUIRE(static_hosts.ok());
  CHECK(static_hosts->num_ranks == 2);       // -np defaults to --min-np
  CHECK(static_hosts->elastic.max_np == 4);  // the hosts' slots

  CHECK(ParseLaunchOptions({"-np", "2", "--min-np", "1", "prog"}).status().message() ==
        "an elastic job (--min-np, --max-np, --host-discovery-script) takes its hosts from "
        "--host-discovery-script or from -H/--hostfile: give one of them");
  CHECK(ParseLaunchOptions({"-np", "5", "--max-np", "4", "--host-discovery-script", "x", "p"})
            .status()
            .message() == "an elastic job needs --min-np <= -np <= --max-np, got 5, 5, 4");
  CHECK(ParseLaunchOptions({"--blacklist-cooldown-range", "10", "5", "--min-np", "1", "p"})
            .status()
            .message() == "--blacklist-cooldown-range: MAX must not be below MIN");
  CHECK_FALSE(ParseLaunchOptions({"-np", "2", "--slots", "2", "prog"})->elastic.enabled);
}

}  // namespace
}  // namespace kolo::launcher
