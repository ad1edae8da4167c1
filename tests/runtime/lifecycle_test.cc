// Scenario 7 of docs/RELIABILITY.md: the runtime's life cycle misused. Enqueue after shutdown,
// shutdown twice, shutdown while ops are in flight, init twice and init after shutdown, through
// the default runtime (kolo::init/shutdown) and through Runtime objects. Every misuse fails at
// once with a message that says what to do, and never runs a callback.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>

#include "kolo/kolo.h"
#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

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
