// The fast path (docs/FAST-PATH.md) through the public API with real ranks: repeated
// allreduces agreed on among the ranks without the controller, mixed with everything that
// still goes through it, and the cases where a cached tensor must leave the fast path.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <numeric>
#include <thread>

#include "core/config/config_table.h"
#include "core/round_lane.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;
using Clock = std::chrono::steady_clock;

namespace {

// Ops in rank r's timeline that completed without a controller sequence number.
int FastOps(const std::string& path, int rank) {
  return kolo::testing::CountOf(kolo::testing::FileText(path + ".rank" + std::to_string(rank)),
                                "\"seq\":0,");
}

// Every rank runs `steps` steps of four cached allreduces, enqueued in an order that differs
// per rank and step, plus (every third step) a tensor never seen before; checks every value.
std::string TrainSteps(Runtime& rt, int steps) {
  const int n = rt.size();
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<float>> grads(4);
    std::vector<int32_t> counts(16, rt.rank() + step);
    std::vector<Status> done(5, Internal("not completed"));
    std::vector<std::atomic<bool>> finished(5);
    int enqueued = 0;
    for (int k = 0; k < 4; ++k) {
      const int t = (k + rt.rank() + step) % 4;  // a different order on every rank
      grads[t].assign(static_cast<size_t>(100 * (t + 1)), static_cast<float>(rt.rank() + t));
      TensorView v{grads[t].data(),
                   DataType::kFloat32,
                   {static_cast<int64_t>(grads[t].size())},
                   Device::Cpu()};
      Status s = rt.AllreduceAsync("grad/" + std::to_string(t), v, v, {}, [&, t](const Status& st) {
        done[t] = st;
        finished[t] = true;
      });
      if (!s.ok()) return "enqueue: " + s.ToString();
      ++enqueued;
    }
    if (step % 3 == 2) {  // uncached: goes to the controller, in the same order as the rest
      TensorView c{counts.data(), DataType::kInt32, {16}, Device::Cpu()};
      Status s = rt.AllreduceAsync("new/" + std::to_string(step), c, c, {}, [&](const Status& st) {
        done[4] = st;
        finished[4] = true;
      });
      if (!s.ok()) return "enqueue new: " + s.ToString();
      ++enqueued;
    } else {
      finished[4] = true;
      done[4] = Status::Ok();
    }
    while (!std::all_of(finished.begin(), finished.end(),
                        [](const std::atomic<bool>& f) { return f.load(); })) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    for (const Status& s : done) {
      if (!s.ok()) return "step " + std::to_string(step) + ": " + s.ToString();
    }
    for (int t = 0; t < 4; ++t) {
      const float want = static_cast<float>(n * (n - 1) / 2 + n * t);
      for (float x : grads[t]) {
        if (x != want) {
          return "step " + std::to_string(step) + " grad/" + std::to_string(t) + ": got " +
                 std::to_string(x) + ", want " + std::to_string(want);
        }
      }
    }
    if (step % 3 == 2 && counts[7] != n * (n - 1) / 2 + n * step) {
      return "step " + std::to_string(step) + " new: got " + std::to_string(counts[7]);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Repeated allreduces skip the controller and stay exact, mixed with new ones",
          "[runtime][fastpath]") {
  Watchdog watchdog("fast path, 3 ranks", std::chrono::seconds(60));
  for (const bool fast : {true, false}) {
    const kolo::testing::TempDir temp("kolo_fast_path_");
    const std::string& dir = temp.path();
    const std::string path = dir + "/trace";
    {
      LocalJob job(3, [&](Options& o) {
        o.fast_path = fast;
        o.timeline_path = path;
      });
      CHECK(job.RunOnAllRanks([](Runtime& rt) { return TrainSteps(rt, 12); }) ==
            std::vector<std::string>{});
      for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
    }
    for (int r = 0; r < 3; ++r) {
      INFO("rank " << r << ", fast path " << fast);
      // Step 0 announces full metadata; from step 1 on the four gradients are cached.
      if (fast) {
        CHECK(FastOps(path, r) >= 4 * 10);
      } else {
        CHECK(FastOps(path, r) == 0);
      }
    }
  }
}

TEST_CASE("Nine ranks agree by dissemination over shared memory and TCP and stay exact",
          "[runtime][fastpath]") {
  // Beyond kAllToAllMaxRanks: each rank has round connections to 6 of its 8 peers and combines
  // each round in 4 steps (core/round_lane.h).
  REQUIRE(RoundPatternFor(9) == RoundPattern::kDissemination);
  const std::string transport = GENERATE("shm", "tcp");
  Watchdog watchdog("fast path, 9 ranks over " + transport, std::chrono::seconds(120));
  const kolo::testing::TempDir temp("kolo_fast_path_");
  const std::string path = temp.path() + "/trace";
  {
    LocalJob job(9, [&](Options& o) {
      o.transport = *TransportFromName(transport);
      o.timeline_path = path;
    });
    CHECK(job.RunOnAllRanks([](Runtime& rt) { return TrainSteps(rt, 6); }) ==
          std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  for (int r = 0; r < 9; ++r) {
    INFO("rank " << r << " over " << transport);
    CHECK(FastOps(path, r) >= 4 * 4);  // steps 2..5 at least took the fast path
  }
}

TEST_CASE("A late rank, over shared memory and TCP, still meets the others",
          "[runtime][fastpath]") {
  Watchdog watchdog("fast path with a late rank", std::chrono::seconds(60));
  for (const char* transport : {"tcp", "shm"}) {
    INFO(transport);
    LocalJob job(2, [&](Options& o) { o.transport = *TransportFromName(transport); });
    auto failures = job.RunOnAllRanks([](Runtime& rt) -> std::string {
      for (int step = 0; step < 30; ++step) {
        // Each rank in turn arrives late, sometimes beyond the wait after which the op goes
        // to the controller instead (divert_after_seconds is 1 s by default).
        if (step % 2 == rt.rank()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(step == 10 ? 1200 : 3));
        }
        float x[5] = {1, 2, 3, 4, static_cast<float>(rt.rank())};
        TensorView v{x, DataType::kFloat32, {5}, Device::Cpu()};
        Status s = rt.Allreduce("w", v, v);
        if (!s.ok() || x[0] != 2 || x[4] != 1) {
          return "step " + std::to_string(step) + ": " + s.ToString() +
                 " x[0]=" + std::to_string(x[0]);
        }
      }
      return "";
    });
    CHECK(failures == std::vector<std::string>{});
  }
}

TEST_CASE("A cached tensor whose shape changes on one rank fails on every rank at once",
          "[runtime][fastpath][errors]") {
  Watchdog watchdog("fast path shape change", std::chrono::seconds(60));
  LocalJob job(3);
  std::vector<double> seconds(3, -1);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<float> w(6, 1.0f);
    for (int step = 0; step < 3; ++step) {
      TensorView v{w.data(), DataType::kFloat32, {6}, Device::Cpu()};
      Status s = rt.Allreduce("w", v, v);
      if (!s.ok()) return "warm-up: " + s.ToString();
    }
    // Rank 1 changes the shape; the others' cached copies must not wait for a round.
    const auto start = Clock::now();
    TensorView changed{w.data(), DataType::kFloat32,
                       rt.rank() == 1 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{6},
                       Device::Cpu()};
    Status s = rt.Allreduce("w", changed, changed);
    seconds[rt.rank()] = std::chrono::duration<double>(Clock::now() - start).count();
    if (s.code() != StatusCode::kMismatch ||
        s.message().find("Mismatched allreduce shapes for 'w'") == std::string::npos) {
      return "expected a shape mismatch, got " + s.ToString();
    }
    // The job goes on, on the fast path again.
    for (int step = 0; step < 3; ++step) {
      std::fill(w.begin(), w.end(), 1.0f);
      TensorView v{w.data(), DataType::kFloat32, {6}, Device::Cpu()};
      s = rt.Allreduce("w", v, v);
      if (!s.ok() || w[5] != 3) return "after: " + s.ToString();
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
  // Well under the 1 s after which a waiting cached op would go to the controller anyway.
  for (double s : seconds) CHECK(s < 0.9);
}

TEST_CASE(
    "shutdown() right after a cached allreduce completes it; a tensor one rank skipped "
    "fails naming that rank",
    "[runtime][fastpath][shutdown]") {
  Watchdog watchdog("fast path shutdown", std::chrono::seconds(60));
  LocalJob job(3);
  std::vector<Status> async(3, Internal("callback never ran"));
  std::vector<float> results(3, -1);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<float> w(4, 1.0f);
    std::vector<float> skipped(4, 1.0f);
    for (int step = 0; step < 3; ++step) {
      TensorView v{w.data(), DataType::kFloat32, {4}, Device::Cpu()};
      TensorView u{skipped.data(), DataType::kFloat32, {4}, Device::Cpu()};
      if (!rt.Allreduce("w", v, v).ok() || !rt.Allreduce("u", u, u).ok()) return "warm-up";
    }
    std::fill(w.begin(), w.end(), 2.0f);
    TensorView v{w.data(), DataType::kFloat32, {4}, Device::Cpu()};
    Status s = rt.AllreduceAsync("w", v, v, {}, [&, r = rt.rank()](const Status& st) {
      async[r] = st;
      results[r] = w[0];
    });
    if (!s.ok()) return "enqueue: " + s.ToString();
    if (rt.rank() != 2) {  // rank 2 never submits 'u' this time
      TensorView u{skipped.data(), DataType::kFloat32, {4}, Device::Cpu()};
      const auto start = Clock::now();
      s = rt.Allreduce("u", u, u);
      const double took = std::chrono::duration<double>(Clock::now() - start).count();
      if (s.code() != StatusCode::kShutdown ||
          s.message().find("rank 2 called shutdown() before submitting 'u'") == std::string::npos) {
        return "expected 'u' to fail naming rank 2, got " + s.ToString();
      }
      if (took > 5) return "'u' failed only after " + std::to_string(took) + " s";
    }
    s = rt.Shutdown();
    return s.ok() ? "" : "shutdown: " + s.ToString();
  });
  CHECK(failures == std::vector<std::string>{});
  for (int r = 0; r < 3; ++r) {
    CHECK(async[r].ok());
    CHECK(results[r] == 6.0f);
  }
}

TEST_CASE("A rank that stopped waiting for the others and left does not break their rounds",
          "[runtime][fastpath][shutdown]") {
  // 9 ranks: dissemination, where rank 2's departure leaves steps it owed ranks 3, 4 and 6.
  const int size = GENERATE(3, 9);
  Watchdog watchdog("fast path, a rank leaves early, " + std::to_string(size) + " ranks",
                    std::chrono::seconds(90));
  // Rank 2 waits KOLO_TIMEOUT_SECONDS for the others' shutdown() and leaves; the others submit
  // only once it has (an event, not a sleep racing the timeout: that lost on a busy machine).
  LocalJob job(size, [](Options& o) { o.timeout_seconds = 4; });
  std::promise<void> rank2_left;
  std::shared_future<void> left = rank2_left.get_future().share();
  // The others shut down only once all have their 'w' result: otherwise a slower one's 'w'
  // fails for another's shutdown() instead of rank 2's departure.
  std::vector<std::promise<void>> w_done(size);
  std::vector<std::shared_future<void>> w_seen;
  for (auto& done : w_done) w_seen.push_back(done.get_future().share());
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<float> w(4, 1.0f);
    TensorView v{w.data(), DataType::kFloat32, {4}, Device::Cpu()};
    for (int step = 0; step < 3; ++step) {
      if (!rt.Allreduce("w", v, v).ok()) {
        if (rt.rank() == 2) rank2_left.set_value();
        return "warm-up";
      }
    }
    if (rt.rank() == 2) {  // leaves alone: it waits for the others until the timeout, then goes
      Status s = rt.Shutdown();
      rank2_left.set_value();
      return s.code() == StatusCode::kDeadlineExceeded ? "" : "rank 2 shutdown: " + s.ToString();
    }
    if (left.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      return "rank 2 did not leave within 30 s";
    }
    Status s = rt.Allreduce("w", v, v);
    w_done[rt.rank()].set_value();
    if (s.code() != StatusCode::kShutdown || s.message().find("rank 2") == std::string::npos ||
        s.message().find("fast path") != std::string::npos) {
      return "expected 'w' to fail naming rank 2's departure, got " + s.ToString();
    }
    for (int r = 0; r < size; ++r) {
      if (r == 2 || r == rt.rank()) continue;
      if (w_seen[r].wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        return "rank " + std::to_string(r) + "'s 'w' did not end within 30 s";
      }
    }
    s = rt.Shutdown();
    return s.ok() ? "" : "shutdown: " + s.ToString();
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE(
    "A cached allreduce submitted right before join still runs first, with zeros from "
    "the ranks that joined",
    "[runtime][fastpath][join]") {
  Watchdog watchdog("fast path and join", std::chrono::seconds(60));
  for (int round = 0; round < 5; ++round) {
    LocalJob job(3);
    // Which rank joins last is the scheduler's choice (rank 0's join can reach the controller
    // before the others' on a busy machine); every rank must be told the same one.
    std::vector<int> lasts(3, -2);
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      std::vector<float> w(8, 1.0f);
      TensorView v{w.data(), DataType::kFloat32, {8}, Device::Cpu()};
      for (int step = 0; step < 3; ++step) {
        if (!rt.Allreduce("w", v, v).ok()) return "warm-up";
      }
      if (rt.rank() != 0) {  // out of data: join at once
        StatusOr<int> last = rt.Join();
        if (last.ok()) lasts[rt.rank()] = *last;
        return last.ok() ? "" : "join: " + last.status().ToString();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * round));
      std::fill(w.begin(), w.end(), 5.0f);
      std::promise<Status> done;
      Status s = rt.AllreduceAsync("w", v, v, {}, [&](const Status& st) { done.set_value(st); });
      if (!s.ok()) return "enqueue: " + s.ToString();
      int last = -1;
      std::promise<Status> joined;
      s = rt.JoinAsync(&last, [&](const Status& st) { joined.set_value(st); });
      if (!s.ok()) return "join enqueue: " + s.ToString();
      s = done.get_future().get();
      if (!s.ok() || w[3] != 5.0f) {
        return "w: " + s.ToString() + " value " + std::to_string(w[3]);
      }
      s = joined.get_future().get();
      lasts[0] = last;
      return s.ok() ? "" : "join: " + s.ToString();
    });
    CHECK(failures == std::vector<std::string>{});
    CHECK((lasts[0] >= 0 && lasts[0] < 3));
    CHECK(lasts == std::vector<int>(3, lasts[0]));
  }
}
