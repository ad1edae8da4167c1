// A process set's own shared memory (runtime/runtime_impl.h, SetExecutor): a set whose members
// all sit on this host runs its collectives through a segment of its own, made by the members
// at the set's first op; a set across hosts (with KOLO_HIERARCHICAL=off; else see
// hierarchical_process_set_test), or any set with KOLO_TRANSPORT=tcp, runs over TCP. Real ranks as
// threads over real gRPC and loopback, posing as two hosts by name (so the job's own collectives
// run over TCP and every SHM_ phase in a timeline is a set's). Every result is checked; the path is
// read from the timeline; a removed set's segment is unmapped.
#include <catch2/catch.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "kolo/options.h"
#include "tests/support/allreduce_sweep.h"
#include "tests/support/host_placement.h"
#include "tests/support/local_job.h"
#include "tests/support/process_set_ops.h"
#include "tests/support/temp_dir.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::AddAndRun;
using kolo::testing::HasActivity;
using kolo::testing::LocalJob;
using kolo::testing::OnHosts;
using kolo::testing::Watchdog;

namespace {

const char* const kShmPhases[] = {"SHM_ALLREDUCE", "SHM_ALLGATHER", "SHM_BROADCAST",
                                  "SHM_REDUCESCATTER"};

}  // namespace

TEST_CASE("A set of one host's ranks runs over its own shared memory, a set across hosts over TCP",
          "[runtime][process_sets][shm]") {
  Watchdog watchdog("process sets over shared memory", std::chrono::seconds(120));
  const kolo::testing::TempDir temp("kolo-process-set-shm-");
  int mappings_with_set = 0;
  {
    // Ranks 0, 1 on host a and 2, 3 on host b; the job's own collectives flat over TCP.
    LocalJob job(4, OnHosts("ab", Hierarchical::kOff, Transport::kAuto, temp.File("t.json")));
    const int before = kolo::testing::KoloShmMappings();
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      int on_b = -1, across = -1;
      std::string failure = AddAndRun(rt, {2, 3}, &on_b);
      if (failure.empty()) failure = AddAndRun(rt, {1, 2}, &across);
      return failure;
    });
    CHECK(failures == std::vector<std::string>{});
    // Host b's set mapped one segment on each of its two ranks; nobody else mapped any.
    mappings_with_set = kolo::testing::KoloShmMappings();
    CHECK(mappings_with_set == before + 2);
    failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      Status removed = rt.RemoveProcessSet(1);
      return removed.ok() ? "" : removed.ToString();
    });
    CHECK(failures == std::vector<std::string>{});
    CHECK(kolo::testing::KoloShmMappings() == before);  // the removed set's segment is gone
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  // Rank 3 ran only the job's ops (TCP) and host b's set's; rank 1 only the job's and the set
  // across hosts: shared memory shows on rank 3 alone.
  const std::string three = kolo::testing::FileText(temp.File("t.rank3.json"));
  for (const char* phase : kShmPhases) CHECK(HasActivity(three, phase));
  const std::string one = kolo::testing::FileText(temp.File("t.rank1.json"));
  for (const char* phase : kShmPhases) CHECK_FALSE(HasActivity(one, phase));
  CHECK(HasActivity(one, "RING_ALLGATHER"));
  CHECK(HasActivity(one, "RING_REDUCESCATTER"));
}

TEST_CASE("With KOLO_TRANSPORT=tcp a set of one host's ranks runs over TCP",
          "[runtime][process_sets][shm]") {
  Watchdog watchdog("process sets over tcp", std::chrono::seconds(120));
  const kolo::testing::TempDir temp("kolo-process-set-shm-");
  {
    LocalJob job(4, OnHosts("ab", Hierarchical::kOff, Transport::kTcp, temp.File("t.json")));
    const int before = kolo::testing::KoloShmMappings();
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      int on_b = -1;
      return AddAndRun(rt, {2, 3}, &on_b);
    });
    CHECK(failures == std::vector<std::string>{});
    CHECK(kolo::testing::KoloShmMappings() == before);
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  const std::string three = kolo::testing::FileText(temp.File("t.rank3.json"));
  for (const char* phase : kShmPhases) CHECK_FALSE(HasActivity(three, phase));
  CHECK(HasActivity(three, "RING_REDUCESCATTER"));
}
