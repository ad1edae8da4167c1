// Process sets across hosts run hierarchically (runtime/runtime_impl.h, StartSetHierarchy):
// six runtimes in one process (real gRPC, real loopback mesh and shared memory) posing as
// three hosts of two ranks, interleaved (ranks 0, 3 on host a, 1, 4 on b, 2, 5 on c), with
// three sets: {1, 2, 4, 5}, two hosts of two members, interleaved in the set's own ranks (so
// a set's places and groups are not the job's); {0, 1, 2}, one member a host; {0, 3, 4}, hosts
// of two and one members. Every result is checked element by element, twice (the second
// time through the fast path's rounds); which path ran is read from the timelines of ranks
// that belong to one kind of set only; the set's shared memory on each host is unmapped when
// the set is removed.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "kolo/options.h"
#include "tests/support/allreduce_sweep.h"
#include "tests/support/host_placement.h"
#include "tests/support/local_job.h"
#include "tests/support/process_set_ops.h"
#include "tests/support/temp_dir.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::HasActivity;
using kolo::testing::LocalJob;
using kolo::testing::OnHosts;
using kolo::testing::RunSetOps;
using kolo::testing::Watchdog;

namespace {

const std::vector<int> kAcross = {1, 2, 4, 5};  // hosts b and c, two members each
const std::vector<int> kOneEach = {0, 1, 2};    // hosts a, b and c, one member each
const std::vector<int> kUneven = {0, 3, 4};     // host a two members, host b one

// The timelines of a job on "abc" that adds the three sets in turn and runs RunSetOps twice in
// each on its members; then removes the set across hosts and checks that its segments are gone.
struct SetJob {
  std::string across_only;     // rank 5's timeline: in kAcross alone
  std::string flat_only;       // rank 3's: in kUneven alone
  int segments_of_across = 0;  // mappings the set across hosts added, process-wide
};

SetJob RunSets(Hierarchical mode, Transport transport) {
  const kolo::testing::TempDir temp("kolo-hierarchical-set-test-");
  SetJob result;
  {
    LocalJob job(6, OnHosts("abc", mode, transport, temp.File("t.json")));
    std::vector<int> ids(3, -1);
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      int set = 0;
      for (const std::vector<int>& members : {kAcross, kOneEach, kUneven}) {
        StatusOr<int> id = rt.AddProcessSet(members);
        if (!id.ok()) return "add_process_set: " + id.status().ToString();
        if (rt.rank() == 0) ids[static_cast<size_t>(set)] = *id;
        ++set;
        if (std::find(members.begin(), members.end(), rt.rank()) == members.end()) continue;
        ProcessSetScope scope(*id);
        for (const char* tag : {"/first", "/cached"}) {
          const std::string failure = RunSetOps(rt, members, tag);
          if (!failure.empty()) return "set " + std::to_string(*id) + tag + ": " + failure;
        }
      }
      return "";
    });
    CHECK(failures == std::vector<std::string>{});
    const int with_sets = kolo::testing::KoloShmMappings();
    failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      Status removed = rt.RemoveProcessSet(ids[0]);
      return removed.ok() ? "" : removed.ToString();
    });
    CHECK(failures == std::vector<std::string>{});
    result.segments_of_across = with_sets - kolo::testing::KoloShmMappings();
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  result.across_only = kolo::testing::FileText(temp.File("t.rank5.json"));
  result.flat_only = kolo::testing::FileText(temp.File("t.rank3.json"));
  return result;
}

const char* const kHierarchicalPhases[] = {"HIERARCHICAL_ALLREDUCE", "HIERARCHICAL_ALLGATHER",
                                           "HIERARCHICAL_BROADCAST", "HIERARCHICAL_REDUCESCATTER"};
const char* const kFlatPhases[] = {"RING_ALLREDUCE", "RING_ALLGATHER", "CHAIN_BROADCAST",
                                   "RING_REDUCESCATTER"};

}  // namespace

TEST_CASE("A process set on several hosts with several members each runs hierarchically",
          "[runtime][process_sets][hierarchical]") {
  const std::string transport = GENERATE(as<std::string>(), "auto", "tcp");
  Watchdog watchdog("hierarchical process sets, " + transport, std::chrono::seconds(180));
  const SetJob job = RunSets(Hierarchical::kOn, *TransportFromName(transport));
  for (const char* phase : kHierarchicalPhases) {
    CHECK(HasActivity(job.across_only, phase));
    CHECK_FALSE(HasActivity(job.flat_only, phase));
  }
  for (const char* phase : kFlatPhases) {
    CHECK_FALSE(HasActivity(job.across_only, phase));
    CHECK(HasActivity(job.flat_only, phase));
  }
  // Over shared memory, the set's members on hosts b and c mapped a segment each (four in all),
  // unmapped at the removal; over TCP, none.
  CHECK(job.segments_of_across == (transport == "auto" ? 4 : 0));
}

TEST_CASE("KOLO_HIERARCHICAL=auto runs a set's large allreduces hierarchically, off none",
          "[runtime][process_sets][hierarchical]") {
  Watchdog watchdog("hierarchical process sets by mode", std::chrono::seconds(180));
  SECTION("auto: the 1.2 MiB allreduce; the 16 KiB reducescatter and the broadcast flat") {
    const SetJob job = RunSets(Hierarchical::kAuto, Transport::kAuto);
    CHECK(HasActivity(job.across_only, "HIERARCHICAL_ALLREDUCE"));
    CHECK_FALSE(HasActivity(job.across_only, "RING_ALLREDUCE"));
    CHECK(HasActivity(job.across_only, "CHAIN_BROADCAST"));
    CHECK(HasActivity(job.across_only, "RING_REDUCESCATTER"));
    CHECK_FALSE(HasActivity(job.across_only, "HIERARCHICAL_BROADCAST"));
    CHECK(job.segments_of_across == 4);
  }
  SECTION("off: every set flat, no segment for the set across hosts") {
    const SetJob job = RunSets(Hierarchical::kOff, Transport::kAuto);
    for (const char* phase : kHierarchicalPhases) CHECK_FALSE(HasActivity(job.across_only, phase));
    for (const char* phase : kFlatPhases) CHECK(HasActivity(job.across_only, phase));
    CHECK(job.segments_of_across == 0);
  }
}

TEST_CASE("A set whose places lie on its hosts in different orders runs hierarchically",
          "[runtime][process_sets][hierarchical]") {
  // "abba": ranks 0, 3 on host a and 1, 2 on b. In the set of all four (a set, not the job),
  // place 0 is ranks 0 (a) and 1 (b), place 1 ranks 2 (b) and 3 (a): the cross planes take
  // the hosts in different orders.
  Watchdog watchdog("hierarchical process set, abba", std::chrono::seconds(120));
  const kolo::testing::TempDir temp("kolo-hierarchical-set-test-");
  {
    LocalJob job(4, OnHosts("abba", Hierarchical::kOn, Transport::kAuto, temp.File("t.json")));
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      StatusOr<int> id = rt.AddProcessSet({0, 1, 2, 3});
      if (!id.ok()) return "add_process_set: " + id.status().ToString();
      ProcessSetScope scope(*id);
      for (const char* tag : {"/first", "/cached"}) {
        const std::string failure = RunSetOps(rt, {0, 1, 2, 3}, tag);
        if (!failure.empty()) return std::string(tag) + ": " + failure;
      }
      return "";
    });
    CHECK(failures == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  const std::string timeline = kolo::testing::FileText(temp.File("t.rank2.json"));
  for (const char* phase : kHierarchicalPhases) CHECK(HasActivity(timeline, phase));
}
