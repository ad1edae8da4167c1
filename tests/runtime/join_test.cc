// Join: ranks with fewer steps join early and keep contributing zeros to the others'
// allreduces; other collectives fail while a rank has joined; every rank learns the last
// rank to join.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

TEST_CASE("Ranks that run out of data join; the others' allreduces still complete",
          "[runtime][join]") {
  Watchdog watchdog("join with uneven steps", std::chrono::seconds(60));
  constexpr int kRanks = 3;
  LocalJob job(kRanks);
  std::vector<int> last(kRanks, -2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    const int steps = rt.rank() == 2 ? 2 : rt.rank() == 1 ? 4 : 6;  // uneven data per rank
    for (int step = 0; step < steps; ++step) {
      std::vector<float> g(33, static_cast<float>(rt.rank() + 1));
      TensorView view{g.data(), DataType::kFloat32, {33}, Device::Cpu()};
      Status s = rt.Allreduce("grad", view, view);
      if (!s.ok()) return "step " + std::to_string(step) + ": " + s.ToString();
      // Ranks that have joined contribute zeros.
      float want = 0;
      for (int r = 0; r < kRanks; ++r) {
        const int r_steps = r == 2 ? 2 : r == 1 ? 4 : 6;
        if (step < r_steps) want += static_cast<float>(r + 1);
      }
      if (g[32] != want) {
        return "step " + std::to_string(step) + ": got " + std::to_string(g[32]) + ", want " +
               std::to_string(want);
      }
    }
    // "Last" is the order in which the joins reach the controller, which for joins less than
    // a millisecond apart (the fast path runs a step in tens of µs) can differ from the order
    // of the calls: rank 0 waits a little so that its join is the last one by any measure.
    if (rt.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    StatusOr<int> joined = rt.Join();
    if (!joined.ok()) return "join: " + joined.status().ToString();
    last[rt.rank()] = *joined;
    // The job goes on normally after everyone joined.
    float x[2] = {1, 1};
    TensorView v{x, DataType::kFloat32, {2}, Device::Cpu()};
    Status s = rt.Allreduce("after", v, v);
    if (!s.ok() || x[0] != kRanks) return "after join: " + s.ToString();
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
  CHECK(last[0] == 0);  // rank 0 has the most steps, so it joins last
  CHECK(last[1] == 0);
  CHECK(last[2] == 0);
}

TEST_CASE("Collectives other than allreduce fail while a rank has joined",
          "[runtime][join][errors]") {
  Watchdog watchdog("join conflicts", std::chrono::seconds(60));
  LocalJob job(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    if (rt.rank() == 1) {
      StatusOr<int> joined = rt.Join();
      return joined.ok() && *joined == 0 ? "" : "join: " + joined.status().ToString();
    }
    float x[4] = {1, 2, 3, 4};
    TensorView v{x, DataType::kFloat32, {4}, Device::Cpu()};
    // Rank 1's join is in flight once an allreduce completes with its zeros.
    for (;;) {
      Status s = rt.Allreduce("probe", v, v);
      if (!s.ok()) return s.ToString();
      if (x[0] == 1.0f) break;  // rank 1 contributed a zero: it has joined
      x[0] = 1.0f;
    }
    Status b = rt.Broadcast("weights", v, 0);
    if (b.code() != StatusCode::kFailedPrecondition ||
        b.message().find("rank 1 has joined") == std::string::npos) {
      return "broadcast while rank 1 joined: " + b.ToString();
    }
    StatusOr<int> joined = rt.Join();
    return joined.ok() && *joined == 0 ? "" : "join: " + joined.status().ToString();
  });
  CHECK(failures == std::vector<std::string>{});
}
