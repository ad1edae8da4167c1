// ElasticMembership below --min-np and after failures (kolo issue 53, F2, F10, F11): hosts that
// all vanish leave the job waiting for hosts, then failing, never finished with code 0; what
// the wait reports; a failed worker on a host the job cannot do without blacklists only its
// slot; every listed host blacklisted for good ends the job at once, naming them. No processes:
// the driver's decisions only (elastic_membership.h).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kolo/elastic.h"
#include "tests/tools/elastic_membership_support.h"

namespace kolo::launcher {
namespace {

using std::chrono::milliseconds;

ElasticMembership::Config ShortTimeout(int initial, int min, int max) {
  ElasticMembership::Config config = MakeConfig(initial, min, max);
  config.elastic_timeout = milliseconds(1000);
  return config;
}

TEST_CASE("Hosts that all vanish leave the job waiting for hosts, and failing, never finished",
          "[tools][elastic]") {
  ElasticMembership m(ShortTimeout(3, 2, 3));
  const Clock::time_point t0 = Clock::now();
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}, {"c", 1}}), t0);
  StartAndJoin(m);
  CHECK(m.Tick(t0).ok());
  CHECK_FALSE(m.ShortOfWorkers().has_value());

  m.UpdateHosts({}, t0);  // the script printed nothing
  CHECK(Stops(m) == std::vector<std::string>{"a:0: its host a is no longer listed",
                                             "b:0: its host b is no longer listed",
                                             "c:0: its host c is no longer listed"});
  for (const char* id : {"a:0", "b:0", "c:0"}) m.OnWorkerExit(id, 143, t0);
  CHECK(m.AllExited());
  CHECK_FALSE(m.Finishing());  // nobody finished: the driver's loop goes on
  CHECK(m.ExitCode(0) == 1);   // and were it to stop here, not with 0

  CHECK(m.Tick(t0).ok());
  std::optional<ElasticMembership::Shortfall> shortfall = m.ShortOfWorkers();
  REQUIRE(shortfall.has_value());
  CHECK(shortfall->live == 0);
  CHECK(shortfall->since == t0);
  CHECK(shortfall->until == t0 + milliseconds(1000));
  CHECK(shortfall->hosts == "the discovery script lists no hosts");
  CHECK(m.Tick(t0 + milliseconds(900)).ok());
  const Status failed = m.Tick(t0 + milliseconds(1100));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.message() ==
        "only 0 worker(s) for 1 s (--elastic-timeout), fewer than --min-np 2 (the discovery "
        "script lists no hosts)");
  CHECK(m.ExitCode(1) == 1);
}

TEST_CASE("Hosts listed again within the elastic timeout get workers that form a generation",
          "[tools][elastic]") {
  ElasticMembership m(ShortTimeout(2, 2, 2));
  const Clock::time_point t0 = Clock::now();
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}}), t0);
  StartAndJoin(m);
  m.UpdateHosts({}, t0);
  m.OnWorkerExit("a:0", 143, t0);
  m.OnWorkerExit("b:0", 143, t0);
  CHECK(m.Tick(t0).ok());
  REQUIRE(m.ShortOfWorkers().has_value());
  m.UpdateHosts(Hosts({{"a", 1}, {"b", 1}}), t0 + milliseconds(500));
  REQUIRE(Ids(m.TakeSlotsToFill(t0 + milliseconds(500))) == std::vector<std::string>{"a:0", "b:0"});
  CHECK(Join(m, "a:0", 0).outcome == ElasticOutcome::kPending);
  const ElasticAssignment b = Join(m, "b:0", 0);
  REQUIRE(b.outcome == ElasticOutcome::kAssigned);
  CHECK(b.generation == 2);
  CHECK(b.size == 2);
  CHECK(m.Tick(t0 + milliseconds(1500)).ok());  // past the first wait's deadline: it ended
  CHECK_FALSE(m.ShortOfWorkers().has_value());
}

TEST_CASE("Nothing is reported short of workers before the first discovery answered",
          "[tools][elastic]") {
  ElasticMembership m(ShortTimeout(2, 2, 2));
  CHECK(m.Tick(Clock::now()).ok());
  CHECK_FALSE(m.ShortOfWorkers().has_value());
}

TEST_CASE("A failed worker on the job's only host blacklists its slot; the others go on",
          "[tools][elastic]") {
  ElasticMembership m(MakeConfig(4, 2, 4));
  m.UpdateHosts(Hosts({{"l", 4}}), Clock::now());
  StartAndJoin(m);
  const int64_t seen = m.Poll("l:0", 0, 1).timestamp;
  m.OnWorkerExit("l:2", 137, Clock::now());
  CHECK(m.TakeNotices() ==
        std::vector<std::string>{"blacklisted slot l:2, not its host: the other hosts have 0 "
                                 "open slot(s), fewer than --min-np 2"});
  CHECK(Stops(m).empty());  // Horovod would stop l:0, l:1 and l:3 with their host
  CHECK(m.Poll("l:0", seen, 1).kinds == elastic::kHostsRemoved);
  Join(m, "l:3", 1);
  Join(m, "l:1", 1);
  const ElasticAssignment l0 = Join(m, "l:0", 1);
  REQUIRE(l0.outcome == ElasticOutcome::kAssigned);
  CHECK(l0.generation == 2);
  CHECK(l0.size == 3);
  CHECK(Join(m, "l:3", 1).rank == 2);
  CHECK(m.TakeSlotsToFill(Clock::now() + std::chrono::hours(1)).empty());  // l:2 for good
  CHECK(m.Tick(Clock::now()).ok());
}

TEST_CASE(
    "A failed worker blacklists its host, stopping its others, when other hosts have "
    "min_np slots",
    "[tools][elastic]") {
  ElasticMembership m(MakeConfig(4, 2, 4));
  m.UpdateHosts(Hosts({{"a", 2}, {"b", 2}}), Clock::now());
  StartAndJoin(m);
  m.OnWorkerExit("a:0", 137, Clock::now());
  CHECK(m.TakeNotices() ==
        std::vector<std::string>{"blacklisted host a (worker a:0 failed with exit code 137)"});
  CHECK(Stops(m) == std::vector<std::string>{"a:1: its host a was blacklisted: worker a:0 "
                                             "failed with exit code 137"});
}

TEST_CASE("A blacklisted slot is used again after its cooldown when one is set",
          "[tools][elastic]") {
  ElasticMembership::Config config = MakeConfig(2, 1, 2);
  config.cooldown_min_seconds = 1;
  config.cooldown_max_seconds = 1;
  ElasticMembership m(config);
  const Clock::time_point t0 = Clock::now();
  m.UpdateHosts(Hosts({{"l", 2}}), t0);
  StartAndJoin(m);
  m.OnWorkerExit("l:1", 1, t0);
  CHECK(m.TakeSlotsToFill(t0 + milliseconds(500)).empty());
  CHECK(Ids(m.TakeSlotsToFill(t0 + milliseconds(1100))) == std::vector<std::string>{"l:1"});
}

TEST_CASE("Every listed host blacklisted for good ends the job at once, naming them",
          "[tools][elastic]") {
  ElasticMembership m(ShortTimeout(2, 1, 2));
  const Clock::time_point t0 = Clock::now();
  m.UpdateHosts(Hosts({{"l", 2}}), t0);
  StartAndJoin(m);
  m.OnWorkerExit("l:0", 1, t0);
  CHECK(m.Tick(t0).ok());  // l:1 is left, --min-np 1
  m.OnWorkerExit("l:1", 3, t0);
  const Status failed = m.Tick(t0);  // not after the elastic timeout: nothing can come
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.message() ==
        "no hosts left after blacklisting l (every slot had a failed worker, the last: worker "
        "l:1 failed with exit code 3); 0 worker(s) left, fewer than --min-np 1 "
        "(--blacklist-cooldown-range lets a blacklisted host or slot be used again)");
  CHECK(m.ExitCode(1) == 1);

  ElasticMembership hosts(MakeConfig(2, 1, 2));  // a host-level blacklisting, then a removal
  hosts.UpdateHosts(Hosts({{"a", 1}, {"b", 1}}), t0);
  StartAndJoin(hosts);
  hosts.OnWorkerExit("b:0", 137, t0);  // a has a slot: b is blacklisted
  hosts.UpdateHosts(Hosts({{"b", 1}}), t0);
  hosts.OnWorkerExit("a:0", 143, t0);  // stopped: a is no longer listed
  CHECK(hosts.Tick(t0).message() ==
        "no hosts left after blacklisting b (worker b:0 failed with exit code 137); 0 worker(s) "
        "left, fewer than --min-np 1 (--blacklist-cooldown-range lets a blacklisted host or slot "
        "be used again)");
}

}  // namespace
}  // namespace kolo::launcher
