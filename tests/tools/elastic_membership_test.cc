// ElasticMembership (launcher/elastic_membership.h): kolorun's elastic driver's decisions,
// driven without processes or a network: which slots get workers, when a generation forms and
// in which order, blacklisting and cooldown, the host clock Poll reports, and how the job ends.
// Join is called with a deadline in the past, so it answers at once (kPending if not formed).
#include "launcher/elastic_membership.h"

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kolo/elastic.h"
#include "tests/support/watchdog.h"
#include "tests/tools/elastic_membership_support.h"

namespace kolo::launcher {
namespace {

TEST_CASE(
    "Elastic membership starts -np workers in host order and forms generation 1 once all "
    "joined",
    "[tools][elastic]") {
  ElasticMembership m(MakeConfig(3, 2, 4));
  m.UpdateHosts(Hosts({{"a", 2}, {"b", 2}}), Clock::now());
  const auto ids = Ids(m.TakeSlotsToFill(Clock::now()));
  CHECK(ids == std::vector<std::string>{"a:0", "a:1", "b:0"});
  CHECK(m.TakeSlotsToFill(Clock::now()).empty());  // started ones are counted

  CHECK(Join(m, "b:0", 0, 7002).outcome == ElasticOutcome::kPending);
  CHECK(Join(m, "a:1", 0, 7001).outcome == ElasticOutcome::kPending);
  const ElasticAssignment last = Join(m, "a:0", 0, 7000);  // the last one: it forms
  REQUIRE(last.outcome == ElasticOutcome::kAssigned);
  CHECK(last.generation == 1);
  CHECK(last.rank == 0);
  CHECK(last.size == 3);
  CHECK(last.controller_address == "a:7000");  // rank 0's host and the port it offered
  CHECK(last.job_id == "kolorun-test.g1");
  CHECK(last.hostname == "a");
  // The others get the same generation when they ask again (their last one is still 0).
  const ElasticAssignment b = Join(m, "b:0", 0);
  CHECK(b.outcome == ElasticOutcome::kAssigned);
  CHECK(b.rank == 2);
  CHECK(b.controller_address == "a:7000");
  CHECK(m.Describe() ==
        "generation 1: 3 rank(s) (a:0 rank 0, a:1 rank 1, b:0 rank 2), controller a:7000");
  CHECK(m.Tick(Clock::now()).ok());
}

TEST_CASE("A failed worker blacklists its host; the survivors re-form keeping their order",
          "[tools][elastic]") {
  ElasticMembership m(MakeConfig(4, 2, 4));
  m.UpdateHosts(Hosts({{"a", 2}, {"b", 1}, {"c", 1}}), Clock::now());
  StartAndJoin(m);
  // b:0 (rank 2) dies; the survivors' ops fail and each asks for the generation after 1.
  m.OnWorkerExit("b:0", 137, Clock::now());
  CHECK(m.TakeWorkersToStop().empty());            // b had no other worker
  CHECK(m.TakeSlotsToFill(Clock::now()).empty());  // b is blacklisted, no other free slot
  CHECK(Join(m, "c:0", 1).outcome == ElasticOutcome::kPending);
  CHECK(Join(m, "a:1", 1).outcome == ElasticOutcome::kPending);
  const ElasticAssignment a0 = Join(m, "a:0", 1, 8000);
  REQUIRE(a0.outcome == ElasticOutcome::kAssigned);
  CHECK(a0.generation == 2);
  CHECK(a0.size == 3);
  CHECK(a0.rank == 0);
  CHECK(Join(m, "a:1", 1).rank == 1);
  CHECK(Join(m, "c:0", 1).rank == 2);  // was rank 3
  CHECK(a0.controller_address == "a:8000");
  // A worker that asks again for the one it has is told it again, not a newer one.
  CHECK(Join(m, "c:0", 1).generation == 2);
}

TEST_CASE("When rank 0's worker is lost the next old member becomes rank 0", "[tools][elastic]") {
  ElasticMembership m(MakeConfig(3, 2, 3));
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}, {"c", 1}}), Clock::now());
  StartAndJoin(m);
  m.OnWorkerExit("a:0", 137, Clock::now());
  Join(m, "c:0", 1, 9002);
  const ElasticAssignment b = Join(m, "b:0", 1, 9001);
  REQUIRE(b.outcome == ElasticOutcome::kAssigned);
  CHECK(b.rank == 0);
  CHECK(b.controller_address == "b:9001");
}

TEST_CASE(
    "A discovered host gets workers up to max_np, newcomers after the old members, and "
    "Poll reports the addition once the newcomer asks to join",
    "[tools][elastic]") {
  ElasticMembership m(MakeConfig(2, 1, 3));
  m.UpdateHosts(Hosts({{"a", 2}}), Clock::now());
  StartAndJoin(m);
  const auto before = m.Poll("a:0", 0, 1);
  CHECK(before.kinds == elastic::kNoUpdate);
  const int64_t seen = before.timestamp;

  m.UpdateHosts(Hosts({{"a", 2}, {"n", 4}}), Clock::now());
  CHECK(m.Poll("a:0", seen, 1).kinds == elastic::kNoUpdate);  // no worker has asked yet
  CHECK(Ids(m.TakeSlotsToFill(Clock::now())) == std::vector<std::string>{"n:0"});  // max_np 3
  // The newcomer asks while both old members train: announced, and it waits for them.
  CHECK(Join(m, "n:0", 0, 9100).outcome == ElasticOutcome::kPending);
  const auto after = m.Poll("a:0", seen, 1);
  CHECK(after.kinds == elastic::kHostsAdded);
  CHECK(after.timestamp > seen);
  CHECK(m.Tick(Clock::now()).ok());
  CHECK(Join(m, "a:1", 1).outcome == ElasticOutcome::kPending);
  const ElasticAssignment a0 = Join(m, "a:0", 1, 9000);
  REQUIRE(a0.outcome == ElasticOutcome::kAssigned);
  CHECK(a0.size == 3);
  CHECK(a0.rank == 0);
  CHECK(Join(m, "n:0", 0).rank == 2);
  // The generation reflects the addition: its members see no update after it.
  CHECK(a0.hosts_timestamp == after.timestamp);
}

TEST_CASE("A host listed when every slot up to max_np is taken makes nobody re-form",
          "[tools][elastic]") {
  ElasticMembership m(MakeConfig(2, 1, 2));
  m.UpdateHosts(Hosts({{"a", 2}}), Clock::now());
  StartAndJoin(m);
  m.UpdateHosts(Hosts({{"a", 2}, {"n", 1}}), Clock::now());
  CHECK(m.TakeSlotsToFill(Clock::now()).empty());
  CHECK(m.Poll("a:0", 0, 1).kinds == elastic::kNoUpdate);
}

TEST_CASE("A newcomer still starting when a member is lost does not hold up the survivors",
          "[tools][elastic]") {
  ElasticMembership m(MakeConfig(3, 2, 4));
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}, {"c", 1}}), Clock::now());
  StartAndJoin(m);
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}, {"c", 1}, {"n", 1}}), Clock::now());
  REQUIRE(Ids(m.TakeSlotsToFill(Clock::now())) == std::vector<std::string>{"n:0"});
  m.OnWorkerExit("c:0", 137, Clock::now());  // lost before the newcomer asked
  Join(m, "b:0", 1);
  const ElasticAssignment a0 = Join(m, "a:0", 1, 9000);
  REQUIRE(a0.outcome == ElasticOutcome::kAssigned);  // n:0 is still importing torch
  CHECK(a0.size == 2);
  // When it asks, the members of generation 2 are told to take it in at their next commit.
  CHECK(Join(m, "n:0", 0).outcome == ElasticOutcome::kPending);
  CHECK(m.Poll("a:0", a0.hosts_timestamp, 2).kinds == elastic::kHostsAdded);
  Join(m, "b:0", 2);
  const ElasticAssignment grown = Join(m, "a:0", 2);
  CHECK(grown.generation == 3);
  CHECK(grown.size == 3);
  CHECK(Join(m, "n:0", 0).rank == 2);
}

TEST_CASE("A host that discovery no longer lists stops its workers and counts as a removal",
          "[tools][elastic]") {
  ElasticMembership m(MakeConfig(3, 1, 3));
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 2}}), Clock::now());
  StartAndJoin(m);
  const int64_t seen = m.Poll("a:0", 0, 1).timestamp;
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}}), Clock::now());  // b lost a slot
  CHECK(Stops(m) == std::vector<std::string>{"b:1: its host b is listed with 1 slot(s) now"});
  CHECK(m.Poll("a:0", seen, 1).kinds == elastic::kHostsRemoved);
  CHECK(Join(m, "b:1", 1).message ==
        "worker b:1 is no longer part of the job: its host b is listed with 1 slot(s) now");
  // Stopped by the driver: its exit code is not a failure and blacklists nothing.
  m.OnWorkerExit("b:1", 143, Clock::now());
  Join(m, "b:0", 1);
  CHECK(Join(m, "a:0", 1).size == 2);
  m.OnWorkerExit("a:0", 0, Clock::now());
  m.OnWorkerExit("b:0", 0, Clock::now());
  CHECK(m.ExitCode(0) == 0);
}

TEST_CASE("A blacklisted host is used again after its cooldown when one is set",
          "[tools][elastic]") {
  ElasticMembership::Config config = MakeConfig(2, 1, 2);
  config.cooldown_min_seconds = 1;
  config.cooldown_max_seconds = 1;
  ElasticMembership m(config);
  const Clock::time_point t0 = Clock::now();
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}}), t0);
  StartAndJoin(m);
  m.OnWorkerExit("b:0", 1, t0);
  CHECK(m.TakeSlotsToFill(t0 + std::chrono::milliseconds(500)).empty());
  CHECK(Ids(m.TakeSlotsToFill(t0 + std::chrono::milliseconds(1100))) ==
        std::vector<std::string>{"b:0"});

  ElasticMembership forever(MakeConfig(2, 1, 2));  // no cooldown: blacklisted for good
  forever.UpdateHosts(Hosts({{"a", 1}, {"b", 1}}), t0);
  StartAndJoin(forever);
  forever.OnWorkerExit("b:0", 1, t0);
  CHECK(forever.TakeSlotsToFill(t0 + std::chrono::hours(1)).empty());
}

TEST_CASE("Fewer live workers than min_np for the elastic timeout ends the job with a reason",
          "[tools][elastic]") {
  ElasticMembership::Config config = MakeConfig(2, 2, 2);
  config.elastic_timeout = std::chrono::milliseconds(1000);
  ElasticMembership m(config);
  const Clock::time_point t0 = Clock::now();
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}}), t0);
  StartAndJoin(m);
  m.OnWorkerExit("b:0", 1, t0);
  Join(m, "a:0", 1);
  CHECK(m.Tick(t0).ok());
  CHECK(m.Tick(t0 + std::chrono::milliseconds(900)).ok());
  const Status failed = m.Tick(t0 + std::chrono::milliseconds(1100));
  REQUIRE_FALSE(failed.ok());
  // b's host would leave a short of min_np: only b's slot is blacklisted.
  CHECK(failed.message() ==
        "only 1 worker(s) for 1 s (--elastic-timeout), fewer than --min-np 2 (hosts listed: a:1, "
        "b:1; blacklisted: b:0)");
  m.OnWorkerExit("a:0", 143, t0);
  CHECK(m.AllExited());
  CHECK(m.ExitCode(1) == 1);  // the last generation's member a:0 was stopped, not failed
}

TEST_CASE(
    "A member that does not rejoin within the elastic timeout is stopped and the rest "
    "re-form",
    "[tools][elastic]") {
  ElasticMembership::Config config = MakeConfig(3, 1, 3);
  config.elastic_timeout = std::chrono::milliseconds(1000);
  ElasticMembership m(config);
  const Clock::time_point t0 = Clock::now();
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}, {"c", 1}}), t0);
  StartAndJoin(m);
  Join(m, "a:0", 1);  // a left its loop (an op failed); b joins too; c hangs
  Join(m, "b:0", 1);
  CHECK(m.Tick(t0).ok());
  CHECK(m.Tick(t0 + std::chrono::milliseconds(1100)).ok());
  CHECK(Stops(m) == std::vector<std::string>{
                        "c:0: it did not ask to join a generation within 1 s (--elastic-timeout)"});
  CHECK(Join(m, "a:0", 1).size == 2);
}

TEST_CASE(
    "Once a worker finishes the job forms no new generation and the exit code is the last "
    "generation's",
    "[tools][elastic]") {
  ElasticMembership m(MakeConfig(2, 1, 2));
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}}), Clock::now());
  StartAndJoin(m);
  m.OnWorkerExit("a:0", 0, Clock::now());
  const ElasticAssignment refused = Join(m, "b:0", 1);
  CHECK(refused.outcome == ElasticOutcome::kRefused);
  CHECK(refused.message ==
        "the job is finishing (worker a:0 exited with code 0), so it forms no new generation");
  CHECK(m.TakeSlotsToFill(Clock::now()).empty());
  m.OnWorkerExit("b:0", 3, Clock::now());
  CHECK(m.AllExited());
  CHECK(m.ExitCode(0) == 3);
}

TEST_CASE("The reset limit stops re-forming and fails the job", "[tools][elastic]") {
  ElasticMembership::Config config = MakeConfig(3, 1, 3);
  config.reset_limit = 1;
  ElasticMembership m(config);
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}, {"c", 1}}), Clock::now());
  StartAndJoin(m);
  m.OnWorkerExit("c:0", 1, Clock::now());
  Join(m, "a:0", 1);
  CHECK(Join(m, "b:0", 1).generation == 2);  // the one reset allowed
  m.OnWorkerExit("b:0", 1, Clock::now());
  CHECK(Join(m, "a:0", 2).outcome == ElasticOutcome::kPending);
  const Status failed = m.Tick(Clock::now());
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.message() ==
        "the job was re-formed 1 times, the --reset-limit; it does not "
        "re-form again");
}

TEST_CASE("Join waits for the generation and is answered when the last worker asks",
          "[tools][elastic]") {
  testing::Watchdog watchdog("elastic Join wait", std::chrono::seconds(20));
  ElasticMembership m(MakeConfig(2, 2, 2));
  m.UpdateHosts(Hosts({{"a", 2}}), Clock::now());
  m.TakeSlotsToFill(Clock::now());
  ElasticAssignment waited;
  std::thread first([&] {
    waited = m.Join({"a:1", 0, 6001}, Clock::now() + std::chrono::seconds(10));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const ElasticAssignment second = Join(m, "a:0", 0, 6000);
  first.join();
  CHECK(second.outcome == ElasticOutcome::kAssigned);
  CHECK(waited.outcome == ElasticOutcome::kAssigned);
  CHECK(waited.rank == 1);
  CHECK(Join(m, "nobody:0", 0).message == "kolorun started no worker 'nobody:0'");
}

TEST_CASE("Poll names a member of the caller's generation that is gone, for rank 0's start",
          "[tools][elastic]") {
  ElasticMembership m(MakeConfig(3, 1, 3));
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}, {"c", 1}}), Clock::now());
  StartAndJoin(m);
  CHECK(m.Poll("a:0", 0, 1).lost_member.empty());
  CHECK(m.Poll("a:0", 0, 1).lost_rank == -1);
  m.OnWorkerExit("c:0", 137, Clock::now());
  CHECK(m.Poll("a:0", 0, 1).lost_member == "worker c:0 (rank 2) exited");
  CHECK(m.Poll("a:0", 0, 1).lost_rank == 2);
  Join(m, "a:0", 1);
  Join(m, "b:0", 1);
  CHECK(m.Poll("a:0", 0, 1).lost_member == "generation 2 formed since");
  CHECK(m.Poll("a:0", 0, 2).lost_member.empty());
}

}  // namespace
}  // namespace kolo::launcher
