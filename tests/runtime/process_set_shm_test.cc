// A process set's own shared memory (runtime/runtime_impl.h, SetExecutor): a set whose members
// all sit on this host runs its collectives through a segment of its own, made by the members
// at the set's first op; a set across hosts, or any set with KOLO_TRANSPORT=tcp, runs over
// TCP. Real ranks as threads over real gRPC and loopback, posing as two hosts by name (so the
// job's own collectives run over TCP and every SHM_ phase in a timeline is a set's). Every
// result is checked; the path is read from the timeline; a removed set's segment is unmapped.
#include <catch2/catch.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "kolo/options.h"
#include "tests/support/allreduce_sweep.h"
#include "tests/support/host_placement.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::HasActivity;
using kolo::testing::LocalJob;
using kolo::testing::OnHosts;
using kolo::testing::Watchdog;

namespace {

TensorView View(std::vector<float>& v) {
  return TensorView{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::Cpu()};
}

// Within the current set (`members`, ascending job ranks): an allreduce past one slot, an
// uneven allgather, a broadcast from the set's last member and a reducescatter, each checked;
// "" or the first wrong result (going on after it, so that the other members are not left
// waiting).
std::string RunSetOps(Runtime& rt, const std::vector<int>& members) {
  std::string first_failure;
  auto fail = [&first_failure](const std::string& text) {
    if (first_failure.empty()) first_failure = text;
  };
  const int n = static_cast<int>(members.size());
  const int me =
      static_cast<int>(std::find(members.begin(), members.end(), rt.rank()) - members.begin());
  // Allreduce: 300,007 floats (1.2 MiB, past a slot), member i contributes i + 1.
  std::vector<float> sum(300007, static_cast<float>(me + 1));
  Status s = rt.Allreduce("set/allreduce", View(sum), View(sum));
  if (!s.ok()) fail("allreduce: " + s.ToString());
  if (s.ok() && (sum.front() != n * (n + 1) / 2.0f || sum.back() != n * (n + 1) / 2.0f)) {
    fail("allreduce: " + std::to_string(sum.front()));
  }
  // Allgather: member i sends i + 2 rows of 3 floats holding its job rank.
  std::vector<float> rows(static_cast<size_t>((me + 2) * 3), static_cast<float>(rt.rank()));
  std::vector<float> gathered;
  s = rt.Allgather("set/allgather", {rows.data(), DataType::kFloat32, {me + 2, 3}, Device::Cpu()},
                   [&gathered](const std::vector<int64_t>& shape) -> void* {
                     gathered.resize(static_cast<size_t>(shape[0] * shape[1]));
                     return gathered.data();
                   });
  if (!s.ok()) fail("allgather: " + s.ToString());
  for (size_t i = 0, at = 0; s.ok() && i < members.size(); ++i) {
    for (size_t k = 0; k < (i + 2) * 3; ++k, ++at) {
      if (gathered[at] != static_cast<float>(members[i]))
        fail("allgather: element " + std::to_string(at));
    }
  }
  // Broadcast from the set's last member (a job rank).
  std::vector<float> shared(70001, rt.rank() == members.back() ? 7.5f : 0.0f);
  s = rt.Broadcast("set/broadcast", View(shared), members.back());
  if (!s.ok()) fail("broadcast: " + s.ToString());
  if (s.ok() && (shared.front() != 7.5f || shared.back() != 7.5f)) fail("broadcast: wrong value");
  // Reducescatter of n * 1001 rows: each member gets 1001 rows of the sum.
  std::vector<float> input(static_cast<size_t>(n) * 1001, static_cast<float>(me + 1));
  std::vector<float> part(1001, -1.0f);
  s = rt.Reducescatter("set/reducescatter", View(input), View(part));
  if (!s.ok()) fail("reducescatter: " + s.ToString());
  if (s.ok() && (part.front() != n * (n + 1) / 2.0f || part.back() != n * (n + 1) / 2.0f)) {
    fail("reducescatter: " + std::to_string(part.front()));
  }
  return first_failure;
}

// Adds `members` on every rank (a collective of the job) and runs RunSetOps on its members.
std::string AddAndRun(Runtime& rt, const std::vector<int>& members, int* id) {
  StatusOr<int> added = rt.AddProcessSet(members);
  if (!added.ok()) return "add_process_set: " + added.status().ToString();
  *id = *added;
  if (std::find(members.begin(), members.end(), rt.rank()) == members.end()) return "";
  ProcessSetScope scope(*id);
  return RunSetOps(rt, members);
}

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
