// A job's ranks behind control relays (KOLO_CONTROL_RELAYS=host; runtime/control_relays.h),
// with real rank processes on 127.0.0.1: 4 ranks on two "hosts" (KOLO_HOSTNAME, with the
// launcher's KOLO_LOCAL_RANK and KOLO_LOCAL_SIZE), so that rank 2 runs the relay of ranks 2
// and 3. Checks results through the relay and that the controller really admitted ranks 2 and
// 3 through it (its log line, not a claim of the ranks), a bad value's error, a member that
// starts before its relay, and the relay's process SIGKILLed (every survivor fails naming it,
// within twice KOLO_TIMEOUT_SECONDS).
#include <signal.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/rank_process.h"
#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

namespace {

using kolo::testing::RankProcess;
using kolo::testing::SecondsBetween;
using kolo::testing::Watchdog;
using kolo::testing::WorkerTime;
using Clock = RankProcess::Clock;
using namespace std::chrono_literals;

constexpr double kTimeout = 2.0;  // KOLO_TIMEOUT_SECONDS
constexpr int kSize = 4;

// Rank r of a job of two hosts of two ranks: ranks 0 and 1 on "host-a", 2 and 3 on "host-b".
std::map<std::string, std::string> RankEnv(int rank, int port, const std::string& relays) {
  return {{"KOLO_RANK", std::to_string(rank)},
          {"KOLO_SIZE", std::to_string(kSize)},
          {"KOLO_LOCAL_RANK", std::to_string(rank % 2)},
          {"KOLO_LOCAL_SIZE", "2"},
          {"KOLO_HOSTNAME", rank < 2 ? "host-a" : "host-b"},
          {"KOLO_CONTROLLER", "127.0.0.1:" + std::to_string(port)},
          {"KOLO_JOB_ID", "relay-job-" + std::to_string(port)},
          {"KOLO_CONTROL_RELAYS", relays},
          {"KOLO_TRANSPORT", "tcp"},
          {"KOLO_TIMEOUT_SECONDS", std::to_string(kTimeout)},
          {"KOLO_START_TIMEOUT_SECONDS", "30"},
          {"KOLO_SECRET", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"},
          {"KOLO_LOG_LEVEL", rank == 0 ? "debug" : "info"}};
}

struct Job {
  std::vector<std::unique_ptr<RankProcess>> ranks;
  std::vector<RankProcess*> live() const {
    std::vector<RankProcess*> out;
    for (const auto& r : ranks) out.push_back(r.get());
    return out;
  }
  void Dump() const {
    for (size_t r = 0; r < ranks.size(); ++r) {
      for (const std::string& line : ranks[r]->lines()) UNSCOPED_INFO(r << ": " << line);
    }
  }
};

// Starts the ranks in `order` (rank numbers), `gap` apart, with `extra` in every environment.
Job StartJob(const std::string& relays, const std::string& worker,
             const std::map<std::string, std::string>& extra = {},
             std::vector<int> order = {0, 1, 2, 3}, std::chrono::milliseconds gap = 0ms) {
  Job job;
  job.ranks.resize(kSize);
  const int port = kolo::testing::PickFreePort();
  for (int r : order) {
    std::map<std::string, std::string> env = RankEnv(r, port, relays);
    for (const auto& [k, v] : extra) env[k] = v;
    job.ranks[r] = std::make_unique<RankProcess>(worker, std::vector<std::string>{}, env, true);
    REQUIRE(job.ranks[r]->running());
    std::this_thread::sleep_for(gap);  // the order of the starts, not synchronisation
  }
  return job;
}

bool Joined(const RankProcess& rank0, int rank) {
  const std::string needle = "rank " + std::to_string(rank) + " joined through control relay";
  for (const std::string& line : rank0.lines()) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

// Runs the checked ops on every rank to the end; every rank must report "RESULT ok".
void RunAndCheck(Job& job) {
  const bool ended = RankProcess::Pump(job.live(), Clock::now() + 90s, [&] {
    for (RankProcess* r : job.live()) {
      if (!r->Find("SHUTDOWN") && !r->Find("INIT")) return false;
    }
    return true;
  });
  job.Dump();
  REQUIRE(ended);
  for (int r = 0; r < kSize; ++r) {
    INFO("rank " << r);
    CHECK(job.ranks[r]->Find("RESULT") == std::optional<std::string>("ok"));
    CHECK(job.ranks[r]->WaitExit(10s) == 0);
  }
}

}  // namespace

TEST_CASE("A job's ranks behind a host's control relay agree, and the controller saw the relay",
          "[runtime][relay]") {
  Watchdog watchdog("ops through a control relay", 120s);
  Job job = StartJob("host", KOLO_RELAY_JOB_WORKER);
  RunAndCheck(job);
  // The controller admitted host-b's ranks through the relay, and host-a's directly.
  CHECK(Joined(*job.ranks[0], 2));
  CHECK(Joined(*job.ranks[0], 3));
  CHECK_FALSE(Joined(*job.ranks[0], 1));
}

TEST_CASE("Without KOLO_CONTROL_RELAYS every rank joins the controller directly",
          "[runtime][relay]") {
  Watchdog watchdog("ops without control relays", 120s);
  Job job = StartJob("off", KOLO_RELAY_JOB_WORKER);
  RunAndCheck(job);
  CHECK_FALSE(Joined(*job.ranks[0], 2));
  CHECK_FALSE(Joined(*job.ranks[0], 3));
}

TEST_CASE("A member that starts before its relay's rank waits for the relay", "[runtime][relay]") {
  Watchdog watchdog("a member before its relay", 120s);
  // Rank 3 retries on the relay's address for a second before rank 2 starts the relay.
  Job job = StartJob("host", KOLO_RELAY_JOB_WORKER, {}, {3, 0, 1, 2}, 400ms);
  RunAndCheck(job);
  CHECK(Joined(*job.ranks[0], 3));
}

TEST_CASE("A relay that never starts fails its members' init naming its rank", "[runtime][relay]") {
  Watchdog watchdog("a relay that never starts", 60s);
  const int port = kolo::testing::PickFreePort();
  std::map<std::string, std::string> env = RankEnv(3, port, "host");
  env["KOLO_START_TIMEOUT_SECONDS"] = "2";
  RankProcess member(KOLO_RELAY_JOB_WORKER, {}, env, true);
  REQUIRE(member.running());
  RankProcess::Pump({&member}, Clock::now() + 30s, [&] { return member.Find("INIT").has_value(); });
  for (const std::string& line : member.lines()) UNSCOPED_INFO(line);
  const std::optional<std::string> init = member.Find("INIT");
  REQUIRE(init.has_value());
  CHECK(init->find("control relay run by rank 2") != std::string::npos);
  CHECK(init->find("never admitted rank 3") != std::string::npos);
}

TEST_CASE("A bad KOLO_CONTROL_RELAYS fails init naming the variable and the value",
          "[runtime][relay]") {
  Watchdog watchdog("a bad KOLO_CONTROL_RELAYS", 60s);
  RankProcess rank(KOLO_RELAY_JOB_WORKER, {},
                   {{"KOLO_CONTROL_RELAYS", "per-host"}, {"KOLO_LOG_LEVEL", "off"}}, true);
  REQUIRE(rank.running());
  RankProcess::Pump({&rank}, Clock::now() + 30s, [&] { return rank.Find("INIT").has_value(); });
  const std::optional<std::string> init = rank.Find("INIT");
  REQUIRE(init.has_value());
  INFO(*init);
  CHECK(init->find("KOLO_CONTROL_RELAYS") != std::string::npos);
  CHECK(init->find("per-host") != std::string::npos);
  CHECK(init->find("host") != std::string::npos);
  CHECK(rank.WaitExit(10s) == 2);
}

TEST_CASE("The relay's process SIGKILLed fails every other rank fast, naming it",
          "[runtime][relay][fault]") {
  Watchdog watchdog("SIGKILL of a relay's rank", 90s);
  // Barriers through the controller (no fast path): no data connection carries them, so the
  // survivors learn of rank 2 from the control plane alone: rank 3 from its relay's stream,
  // ranks 0 and 1 from the controller losing the relay.
  Job job = StartJob("host", KOLO_FAULT_WORKER,
                     {{"FAULT_WORKER_OP", "barrier"}, {"KOLO_FAST_PATH", "0"}});
  const bool ready = RankProcess::Pump(job.live(), Clock::now() + 60s, [&] {
    for (RankProcess* r : job.live()) {
      if (!r->Find("ready")) return false;
    }
    return true;
  });
  if (!ready) job.Dump();
  REQUIRE(ready);
  REQUIRE(Joined(*job.ranks[0], 3));
  const Clock::time_point killed = job.ranks[2]->Signal(SIGKILL);
  RankProcess::Pump(job.live(), Clock::now() + 20s, [&] {
    for (int r : {0, 1, 3}) {
      if (!job.ranks[r]->Find("LONELY")) return false;
    }
    return true;
  });
  job.Dump();
  for (int r : {0, 1, 3}) {
    INFO("rank " << r);
    const std::vector<std::string> failures = job.ranks[r]->FindAll("FAILED");
    REQUIRE(!failures.empty());
    const std::string& first = failures.front();  // "<ns> <name> <status>"
    const double seconds = SecondsBetween(killed, WorkerTime(first));
    INFO(first);
    CHECK(seconds < 2 * kTimeout);
    CHECK(first.find("rank 2") != std::string::npos);
    // Rank 3's stream went through the relay: its error names the relay, not "the controller".
    if (r == 3) CHECK(first.find("control relay run by rank 2") != std::string::npos);
  }
}
