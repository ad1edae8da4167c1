// Scenario 7 of docs/RELIABILITY.md: the runtime's life cycle misused. Enqueue after shutdown,
// shutdown twice, shutdown while ops are in flight, init twice and init after shutdown, through
// the default runtime (kolo::init/shutdown) and through Runtime objects. Every misuse fails at
// once with a message that says what to do, and never runs a callback.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.h"
#include "tests/support/local_job.h"
#include "tests/support/seconds_since.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

using kolo::testing::SecondsSince;

}  // namespace

TEST_CASE("The default runtime refuses ops after shutdown, shuts down twice and inits again",
          "[runtime][fault][lifecycle]") {
  Watchdog watchdog("default runtime life cycle", std::chrono::seconds(60));
  Options options;  // one rank, a controller on any free loopback port
  float x[2] = {1, 2};
  TensorView view{x, DataType::kFloat32, {2}, Device::Cpu()};
  std::atomic<int> callbacks{0};
  auto count = [&](const Status&) { ++callbacks; };

  Status before = allreduce_async("early", view, view, {}, count);
  CHECK(before.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(before.message(), Catch::Contains("call kolo::init() first"));

  REQUIRE(init(options).ok());
  Status twice = init(options);
  CHECK(twice.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(twice.message(), Catch::Contains("already initialized"));
  REQUIRE(allreduce("a", view, view).ok());
  CHECK(shutdown().ok());
  CHECK(shutdown().ok());  // twice: nothing left to do, not an error

  const auto start = std::chrono::steady_clock::now();
  Status after = allreduce_async("late", view, view, {}, count);
  CHECK(SecondsSince(start) < 0.5);  // at once, not after a deadline
  CHECK(after.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(after.message(), Catch::Contains("shut down") && Catch::Contains("init() again"));
  CHECK(barrier().code() == StatusCode::kFailedPrecondition);

  // init after shutdown starts a new job that works.
  REQUIRE(init(options).ok());
  x[0] = 3;
  REQUIRE(allreduce("a", view, view).ok());
  CHECK(x[0] == 3.0f);
  CHECK(shutdown().ok());
  CHECK(callbacks == 0);
}

TEST_CASE("A Runtime refuses ops after Shutdown and shuts down twice without harm",
          "[runtime][fault][lifecycle]") {
  Watchdog watchdog("Runtime life cycle", std::chrono::seconds(60));
  LocalJob job(2);
  // Shutdown() waits for every rank: call it on both at once (ShutdownAll would destroy them).
  for (int round = 0; round < 2; ++round) {
    auto first = std::async(std::launch::async, [&] { return job.rank(0).Shutdown(); });
    CHECK(job.rank(1).Shutdown().ok());
    CHECK(first.get().ok());
  }
  float x[2] = {1, 2};
  TensorView view{x, DataType::kFloat32, {2}, Device::Cpu()};
  std::atomic<int> callbacks{0};
  const auto start = std::chrono::steady_clock::now();
  Status late =
      job.rank(1).AllreduceAsync("late", view, view, {}, [&](const Status&) { ++callbacks; });
  CHECK(SecondsSince(start) < 0.5);
  CHECK(late.code() == StatusCode::kShutdown);
  CHECK_THAT(late.message(), Catch::Contains("shut down"));
  CHECK(job.rank(0).Allreduce("late", view, view).code() == StatusCode::kShutdown);
  CHECK(callbacks == 0);
}

TEST_CASE("Shutdown while a peer's ops are in flight ends them on every rank, in bounded time",
          "[runtime][fault][lifecycle]") {
  Watchdog watchdog("shutdown with ops in flight", std::chrono::seconds(60));
  LocalJob job(3, [](Options& o) { o.timeout_seconds = 2; });
  // Rank 0 submits ops nobody else does, and a large one all ranks submit; then every rank
  // shuts down at once.
  std::vector<std::vector<float>> big(3, std::vector<float>(1 << 20, 1.0f));
  std::vector<std::promise<Status>> big_done(3);
  std::promise<Status> lonely_done;
  float lonely[4] = {1, 1, 1, 1};
  TensorView lonely_view{lonely, DataType::kFloat32, {4}, Device::Cpu()};
  REQUIRE(job.rank(0)
              .AllreduceAsync("lonely", lonely_view, lonely_view, {},
                              [&](const Status& s) { lonely_done.set_value(s); })
              .ok());
  for (int r = 0; r < 3; ++r) {
    TensorView view{big[r].data(), DataType::kFloat32, {1 << 20}, Device::Cpu()};
    REQUIRE(job.rank(r)
                .AllreduceAsync("big", view, view, {},
                                [&big_done, r](const Status& s) { big_done[r].set_value(s); })
                .ok());
  }
  const auto start = std::chrono::steady_clock::now();
  for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  const double seconds = SecondsSince(start);
  CHECK(seconds < 2 * 2.0);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(big_done[r].get_future().get().ok());  // submitted everywhere: it still completes
    CHECK(big[r][12345] == 3.0f);
  }
  Status pending = lonely_done.get_future().get();
  CHECK(pending.code() == StatusCode::kShutdown);
  CHECK_THAT(pending.message(), Catch::Contains("'lonely'"));
  std::fprintf(stderr, "measured: shutdown of 3 ranks with ops in flight took %.3f s\n", seconds);
}

TEST_CASE("Four ranks re-initialise 50 times on one controller port, each job exact",
          "[runtime][fault][lifecycle][reinit]") {
  // Each rank loops on its own thread: Create, a few allreduces, Shutdown, and again at once.
  // A worker that shuts down first reaches rank 0's old controller, still stopping, with its
  // next Hello; it must keep trying until the new controller is up, as for a refused
  // connection, not give up (issue 13).
  Watchdog watchdog("4 ranks re-init 50 times", std::chrono::seconds(150));
  constexpr int kSize = 4;
  constexpr int kJobs = 50;
  const int port = kolo::testing::PickFreePort();
  REQUIRE(port > 0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> failures(kSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r) {
    threads.emplace_back([&, r] {
      Options options;
      options.rank = r;
      options.size = kSize;
      options.controller_address = "127.0.0.1:" + std::to_string(port);
      options.secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
      options.job_id = "reinit";
      options.timeout_seconds = 10;
      options.start_timeout_seconds = 20;
      for (int job = 0; job < kJobs; ++job) {
        const std::string where = "job " + std::to_string(job) + ": ";
        StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(options);
        if (!runtime.ok()) {
          failures[r] = where + "init: " + runtime.status().ToString();
          return;
        }
        for (int step = 0; step < 3; ++step) {
          // Distinct per rank, job and step, so a value from another job or step shows.
          std::vector<float> x(17 + step * 100, static_cast<float>(r + 1 + job * 10 + step));
          TensorView view{
              x.data(), DataType::kFloat32, {static_cast<int64_t>(x.size())}, Device::Cpu()};
          Status reduced = (*runtime)->Allreduce("x/" + std::to_string(step), view, view);
          const float expected = static_cast<float>(10 + kSize * (job * 10 + step));
          if (!reduced.ok() || x.front() != expected || x.back() != expected) {
            failures[r] = where + "allreduce " + std::to_string(step) + ": " + reduced.ToString() +
                          ", got " + std::to_string(x.front()) + ", expected " +
                          std::to_string(expected);
            return;
          }
        }
        Status shut = (*runtime)->Shutdown();
        if (!shut.ok()) {
          failures[r] = where + "shutdown: " + shut.ToString();
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kSize; ++r) {
    INFO("rank " << r);
    CHECK(failures[r] == "");
  }
  std::fprintf(stderr, "measured: %d jobs of %d ranks, one after another, took %.3f s\n", kJobs,
               kSize, SecondsSince(start));
}
