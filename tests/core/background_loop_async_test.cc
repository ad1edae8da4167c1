// BackgroundLoop with an executor that completes ops on its own thread (tests/core/loop_job.h):
// names kept until completion, callbacks on the completion thread, shutdown() waiting for ops
// in flight, a failed device op's abort and a device that never completes.
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "core/loop/background_loop.h"
#include "core/loop/loop_state.h"
#include "tests/core/loop_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::testing;
using namespace std::chrono_literals;

TEST_CASE(
    "An op launched asynchronously keeps its name until its executor completes it, and "
    "its callback runs on the completion thread, which counts as kolo's",
    "[core][loop][async]") {
  testing::Watchdog watchdog("background loop: async completion", 30s);
  AsyncExecutor executor;
  LoopJob job(1, &executor);
  std::vector<float> x(4, 1.0f);
  std::mutex mu;
  std::thread::id ran_on;
  bool was_background = false;
  Status blocking;
  Outcome done;
  Callback inner = done.callback();
  REQUIRE(job.Allreduce("x", &x,
                        [&](const Status& s) {
                          {
                            std::lock_guard<std::mutex> lock(mu);
                            ran_on = std::this_thread::get_id();
                            was_background = BackgroundLoop::IsBackgroundThread();
                            blocking = job.loop().Stop();  // must refuse: it would wait on itself
                          }
                          inner(s);
                        })
              .ok());
  REQUIRE(executor.WaitLaunched(1));
  std::vector<float> again(4, 2.0f);
  const Status duplicate = job.Allreduce("x", &again, [](const Status&) {});
  CHECK_FALSE(duplicate.ok());
  CHECK_THAT(duplicate.message(), Catch::Contains("'x'"));
  CHECK(done.calls() == 0);
  executor.CompleteOldest();
  CHECK(done.Wait().ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    CHECK(ran_on == executor.thread_id());
    CHECK(was_background);
    CHECK(blocking.code() == StatusCode::kFailedPrecondition);
  }
  // The name is free again once the callback ran.
  Outcome second;
  REQUIRE(job.Allreduce("x", &again, second.callback()).ok());
  REQUIRE(executor.WaitLaunched(1));
  executor.CompleteOldest();
  CHECK(second.Wait().ok());
  CHECK(job.loop().Stop().ok());
}

TEST_CASE("shutdown() waits for ops in flight on the device", "[core][loop][async]") {
  testing::Watchdog watchdog("background loop: async shutdown", 30s);
  AsyncExecutor executor;
  LoopJob job(1, &executor);
  std::vector<float> x(4, 1.0f);
  Outcome done;
  REQUIRE(job.Allreduce("x", &x, done.callback()).ok());
  REQUIRE(executor.WaitLaunched(1));
  std::future<Status> stopped = job.StopAsync();
  CHECK(stopped.wait_for(300ms) == std::future_status::timeout);
  executor.CompleteOldest();
  REQUIRE(stopped.wait_for(10s) == std::future_status::ready);
  CHECK(stopped.get().ok());
  CHECK(done.Wait().ok());
  CHECK(executor.interrupts() == 0);
}

TEST_CASE(
    "A failed device op aborts the job; the op still in flight fails once with the same "
    "root cause",
    "[core][loop][async]") {
  testing::Watchdog watchdog("background loop: async failure", 30s);
  AsyncExecutor executor;
  LoopJob job(1, &executor);
  std::vector<float> x(4, 1.0f), y(4, 2.0f);
  Outcome ox, oy;
  REQUIRE(job.Allreduce("x", &x, ox.callback()).ok());
  REQUIRE(executor.WaitLaunched(1));
  REQUIRE(job.Allreduce("y", &y, oy.callback()).ok());
  REQUIRE(executor.WaitLaunched(2));
  executor.CompleteOldest(Unavailable("allreduce 'x': ncclRemoteError: rank 1 is gone"));
  // The loop waits up to min(T/4, 1 s) of its clock for the controller's verdict.
  std::this_thread::sleep_for(100ms);
  job.Advance(1s);
  const Status sx = ox.Wait();
  const Status sy = oy.Wait();
  CHECK(sx.message() == "allreduce 'x': ncclRemoteError: rank 1 is gone");
  CHECK(sy == sx);
  CHECK(ox.calls() == 1);
  CHECK(oy.calls() == 1);
  CHECK(executor.interrupts() >= 1);
  CHECK(job.loop().Stop() == sx);
}

TEST_CASE("An op the device never completes is interrupted after the timeout at shutdown",
          "[core][loop][async]") {
  testing::Watchdog watchdog("background loop: async hang", 30s);
  AsyncExecutor executor;
  LoopJob job(1, &executor);
  std::vector<float> x(4, 1.0f);
  Outcome done;
  REQUIRE(job.Allreduce("x", &x, done.callback()).ok());
  REQUIRE(executor.WaitLaunched(1));
  const Status s = job.StopAtDeadline();
  CHECK(s.code() == StatusCode::kDeadlineExceeded);
  CHECK(s.message() ==
        "shutdown: 1 device op(s) still in flight 30 s (KOLO_TIMEOUT_SECONDS) after the job "
        "ended");
  CHECK(done.Wait() == s);
  CHECK(done.calls() == 1);
}
