// Grouped ops and barriers on the fast path (docs/FAST-PATH.md, "Which ops") through the public
// API with real ranks: repeated grouped allreduces and barriers, of the job and of a process
// set, agreed on in rounds from their second call on, cut as the controller cuts a group (one
// transfer per dtype whatever the threshold) and exact; a rank late to a group; a barrier that
// one rank never reaches fails naming it within the stall bound.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/config/config_table.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;
using Clock = std::chrono::steady_clock;

namespace {

// Rank r's timeline lines of op `op` ("ALLREDUCE", "BARRIER") that completed: `fast` those
// without a controller sequence number (a round decided them), `sizes` the group_size each
// carried.
struct Ops {
  int fast = 0;
  int total = 0;
  std::vector<int> sizes;
};
Ops OpsOf(const std::string& path, int rank, const std::string& op) {
  std::ifstream in(path + ".rank" + std::to_string(rank));
  Ops ops;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"name\":\"" + op + "\"") == std::string::npos) continue;
    const size_t size = line.find("\"group_size\":");
    if (size == std::string::npos) continue;  // a phase or a begin event
    ++ops.total;
    if (line.find("\"seq\":0,") != std::string::npos) ++ops.fast;
    ops.sizes.push_back(std::stoi(line.substr(size + 13)));
  }
  return ops;
}

// One step: a grouped allreduce of two float32 tensors of 4 KiB and a float64 one, then a
// barrier; every value checked. `ranks` members take part, whose job ranks add up to `sum`.
std::string GroupStep(Runtime& rt, int step, int ranks, int sum,
                      const std::vector<std::string>& names = {"g/a", "g/c", "g/b"}) {
  const std::string at = "step " + std::to_string(step) + ": ";
  std::vector<float> a(1024, static_cast<float>(rt.rank() + step));
  std::vector<float> b(1024, static_cast<float>(2 * rt.rank()));
  std::vector<double> c(100, static_cast<double>(rt.rank() * step));
  const std::vector<TensorView> views = {{a.data(), DataType::kFloat32, {1024}, Device::Cpu()},
                                         {c.data(), DataType::kFloat64, {100}, Device::Cpu()},
                                         {b.data(), DataType::kFloat32, {1024}, Device::Cpu()}};
  Status s = rt.GroupedAllreduce(names, views, views);
  if (!s.ok()) return at + s.ToString();
  if (a[7] != static_cast<float>(sum + ranks * step) || b[1023] != static_cast<float>(2 * sum) ||
      c[99] != static_cast<double>(sum * step)) {
    return at + "wrong values " + std::to_string(a[7]) + " " + std::to_string(b[1023]) + " " +
           std::to_string(c[99]);
  }
  s = rt.Barrier();
  return s.ok() ? "" : at + "barrier: " + s.ToString();
}

}  // namespace

TEST_CASE(
    "Repeated grouped allreduces and barriers skip the controller, cut one transfer per dtype "
    "as the controller cuts them",
    "[runtime][fastpath][group][barrier]") {
  const std::string transport = GENERATE("shm", "tcp");
  Watchdog watchdog("fast path groups over " + transport, std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo_fast_path_groups_");
  const std::string path = temp.path() + "/trace";
  const int ranks = 3;
  const int steps = 6;
  {
    LocalJob job(ranks, [&](Options& o) {
      o.transport = *TransportFromName(transport);
      o.timeline_path = path;
      o.fusion_threshold_bytes = 1024;  // below one member: a group ignores it
    });
    CHECK(job.RunOnAllRanks([&](Runtime& rt) {
      for (int step = 0; step < steps; ++step) {
        std::string failed = GroupStep(rt, step, ranks, ranks * (ranks - 1) / 2);
        if (!failed.empty()) return failed;
      }
      return std::string();
    }) == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  for (int r = 0; r < ranks; ++r) {
    INFO("rank " << r << " over " << transport);
    // Step 0 announces full metadata; from step 1 on the group and the barrier are cached.
    const Ops allreduces = OpsOf(path, r, "ALLREDUCE");
    CHECK(allreduces.total == 3 * steps);
    CHECK(allreduces.fast == 3 * (steps - 1));
    // Each member's op names its response's size: the two float32 members travel together
    // (8 KiB above the 1 KiB threshold), the float64 alone, on either path.
    for (int size : allreduces.sizes) CHECK((size == 2 || size == 1));
    const Ops barriers = OpsOf(path, r, "BARRIER");
    CHECK(barriers.total == steps);
    CHECK(barriers.fast == steps - 1);
  }
}

TEST_CASE("A process set's repeated barriers and groups take the rounds among the job's ranks",
          "[runtime][fastpath][group][barrier]") {
  Watchdog watchdog("fast path set barriers", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo_fast_path_groups_");
  const std::string path = temp.path() + "/trace";
  const int steps = 5;
  {
    LocalJob job(3, [&](Options& o) { o.timeline_path = path; });
    CHECK(job.RunOnAllRanks([&](Runtime& rt) {
      StatusOr<int> set = rt.AddProcessSet({0, 2});
      if (!set.ok()) return set.status().ToString();
      if (rt.rank() == 1) return std::string();  // not a member: its rounds answer for the set
      ProcessSetScope in_set(*set);
      for (int step = 0; step < steps; ++step) {
        std::string failed = GroupStep(rt, step, 2, 0 + 2);
        if (!failed.empty()) return failed;
      }
      return std::string();
    }) == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  for (int r : {0, 2}) {
    INFO("rank " << r);
    CHECK(OpsOf(path, r, "ALLREDUCE").fast == 3 * (steps - 1));
    CHECK(OpsOf(path, r, "BARRIER").fast == steps - 1);
  }
}

TEST_CASE("Members whose names hold commas or backslashes keep their places on the rounds",
          "[runtime][fastpath][group]") {
  // The group's key joins the names with commas (GroupKey); a member's place is read back from
  // it, in the job and in a process set (whose suffix both carry).
  Watchdog watchdog("fast path group names with commas", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo_fast_path_groups_");
  const std::string path = temp.path() + "/trace";
  const std::vector<std::string> names = {"w,0", "w\\,b", "w,0,w"};
  const int steps = 5;
  {
    LocalJob job(3, [&](Options& o) { o.timeline_path = path; });
    CHECK(job.RunOnAllRanks([&](Runtime& rt) {
      StatusOr<int> set = rt.AddProcessSet({0, 2});
      if (!set.ok()) return set.status().ToString();
      for (int step = 0; step < steps; ++step) {
        std::string failed = GroupStep(rt, step, 3, 0 + 1 + 2, names);
        if (!failed.empty()) return failed;
        if (rt.rank() == 1) continue;
        ProcessSetScope in_set(*set);
        failed = GroupStep(rt, step, 2, 0 + 2, names);
        if (!failed.empty()) return "in the set: " + failed;
      }
      return std::string();
    }) == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  for (int r : {0, 2}) {
    INFO("rank " << r);
    const Ops allreduces = OpsOf(path, r, "ALLREDUCE");
    CHECK(allreduces.fast == 2 * 3 * (steps - 1));
    for (int size : allreduces.sizes) CHECK((size == 2 || size == 1));
  }
}

TEST_CASE("A rank late to a cached group or barrier is waited for, then runs with the others",
          "[runtime][fastpath][group][barrier]") {
  Watchdog watchdog("fast path late group", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo_fast_path_groups_");
  const std::string path = temp.path() + "/trace";
  const int steps = 8;
  {
    LocalJob job(2, [&](Options& o) { o.timeline_path = path; });
    CHECK(job.RunOnAllRanks([&](Runtime& rt) {
      for (int step = 0; step < steps; ++step) {
        // Each rank in turn arrives 20 ms late: well within the 1 s before an op waiting for a
        // round goes to the controller.
        if (step % 2 == rt.rank()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::string failed = GroupStep(rt, step, 2, 0 + 1);
        if (!failed.empty()) return failed;
      }
      return std::string();
    }) == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(OpsOf(path, r, "ALLREDUCE").fast == 3 * (steps - 1));
    CHECK(OpsOf(path, r, "BARRIER").fast == steps - 1);
  }
}

TEST_CASE(
    "A cached barrier one rank never reaches leaves the rounds and fails naming it within the "
    "stall bound",
    "[runtime][fastpath][barrier][stall]") {
  Watchdog watchdog("fast path barrier stall", std::chrono::seconds(30));
  LocalJob job(2, [](Options& o) {
    o.stall_check_seconds = 0.2;  // an op waits 0.1 s for a round, then goes to the controller
    o.stall_shutdown_seconds = 0.5;
  });
  CHECK(job.RunOnAllRanks([](Runtime& rt) {
    for (int step = 0; step < 3; ++step) {
      Status s = rt.Barrier();
      if (!s.ok()) return s.ToString();
    }
    return std::string();
  }) == std::vector<std::string>{});
  const auto start = Clock::now();
  Status s = job.rank(0).Barrier();  // rank 1 never calls it
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  CHECK(s.code() == StatusCode::kAborted);
  CHECK_THAT(s.message(), Catch::Contains("KOLO_STALL_SHUTDOWN_SECONDS") &&
                              Catch::Contains("rank 1 never submitted 'kolo.barrier'"));
  CHECK(seconds >= 0.5);
  CHECK(seconds < 5.0);
}

TEST_CASE("An op a rank submitted before a cached barrier completes before the barrier does",
          "[runtime][fastpath][barrier]") {
  Watchdog watchdog("fast path barrier order", std::chrono::seconds(60));
  LocalJob job(2);
  CHECK(job.RunOnAllRanks([](Runtime& rt) {
    for (int step = 0; step < 40; ++step) {  // a race without the rule: 40 chances
      // A new name every step: it goes to the controller, and its response arrives after the
      // round that could decide the barrier (cached from step 1 on) would have.
      std::atomic<bool> done{false};
      float x[4] = {1, 2, 3, 4};
      TensorView v{x, DataType::kFloat32, {4}, Device::Cpu()};
      Status s = rt.AllreduceAsync("before/" + std::to_string(step), v, v, {},
                                   [&](const Status&) { done = true; });
      if (!s.ok()) return s.ToString();
      s = rt.Barrier();
      const bool first = done;
      while (!done) std::this_thread::yield();  // the callback refers to this frame
      if (!s.ok()) return s.ToString();
      if (!first) return "step " + std::to_string(step) + ": the barrier completed first";
    }
    return std::string();
  }) == std::vector<std::string>{});
}
