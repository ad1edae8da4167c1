// BackgroundLoop's life (tests/core/loop_job.h): a rank that stops while its peers do not or
// still run, a job-wide Shutdown out of turn, the controller's Abort, a failed collective's
// bounded wait for the verdict, and the states' transitions.
#include <catch2/catch.hpp>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "core/loop/background_loop.h"
#include "core/loop/loop_state.h"
#include "tests/core/loop_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::testing;
using namespace std::chrono_literals;

TEST_CASE("A rank whose peers never call shutdown() leaves exactly at the stop deadline",
          "[core][loop]") {
  testing::Watchdog watchdog("background loop: stop deadline", 30s);
  LoopJob job(2);
  std::vector<float> x(4, 1.0f);
  Outcome pending;
  // Rank 1 never announces 'x' nor sends its shutdown notice.
  REQUIRE(job.Allreduce("x", &x, pending.callback()).ok());
  const Status s = job.StopAtDeadline();
  CHECK(s.code() == StatusCode::kDeadlineExceeded);
  CHECK(s.message() ==
        "shutdown: not every rank called shutdown() within 30 s (KOLO_TIMEOUT_SECONDS); leaving "
        "without them");
  // The op rank 1 never submitted fails with shutdown, once.
  const Status op = pending.Wait();
  CHECK(op.code() == StatusCode::kShutdown);
  CHECK(pending.calls() == 1);
}

TEST_CASE("A stopping rank keeps running what was submitted until the job-wide Shutdown",
          "[core][loop]") {
  testing::Watchdog watchdog("background loop: drain", 30s);
  LoopJob job(2);
  std::vector<float> x(4, 1.0f);
  Outcome done;
  REQUIRE(job.Allreduce("x", &x, done.callback()).ok());
  std::future<Status> stopped = job.StopAsync();
  CHECK(stopped.wait_for(200ms) == std::future_status::timeout);
  job.AnnounceFrom(1, "x", 4);  // rank 1 catches up: 'x' runs while rank 0 drains
  CHECK(done.Wait().ok());
  job.ShutdownNoticeFrom(1);  // the last notice: the controller sends Shutdown to all
  REQUIRE(stopped.wait_for(10s) == std::future_status::ready);
  CHECK(stopped.get().ok());
  CHECK(job.others().count(ControllerMessage::Kind::kShutdown) == 1);
}

TEST_CASE("A job-wide Shutdown before this rank's own notice is a protocol error", "[core][loop]") {
  testing::Watchdog watchdog("background loop: early Shutdown", 30s);
  LoopJob job(2);
  std::vector<float> x(4, 1.0f);
  Outcome pending;
  REQUIRE(job.Allreduce("x", &x, pending.callback()).ok());
  ControllerMessage shutdown;
  shutdown.kind = ControllerMessage::Kind::kShutdown;
  job.Deliver(shutdown);
  const Status failed = pending.Wait();
  CHECK(failed.code() == StatusCode::kInternal);
  CHECK(failed.message() ==
        "protocol error: the job-wide Shutdown arrived while this rank was running, before its "
        "own shutdown notice");
  CHECK(job.data_plane().interrupted().message() == failed.message());
  CHECK(job.loop().Stop().message() == failed.message());
}

TEST_CASE("The controller's Abort fails every pending and later op with its reason",
          "[core][loop]") {
  testing::Watchdog watchdog("background loop: abort", 30s);
  LoopJob job(2);
  std::vector<float> x(4, 1.0f), y(2, 1.0f);
  Outcome ox, oy;
  REQUIRE(job.Allreduce("x", &x, ox.callback()).ok());
  REQUIRE(job.Allreduce("y", &y, oy.callback()).ok());
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = "rank 1 lost: control stream of rank 1 closed without shutdown";
  job.Deliver(abort);
  for (Outcome* o : {&ox, &oy}) {
    const Status s = o->Wait();
    CHECK(s.code() == StatusCode::kAborted);
    CHECK(s.message() == abort.reason);
  }
  std::vector<float> z(1);
  const Status later = job.Allreduce("z", &z, [](const Status&) {});
  CHECK(later.message() == abort.reason);
  CHECK(job.loop().Stop().message() == abort.reason);
}

TEST_CASE(
    "A failed collective waits a bounded time of the loop's clock for the controller's "
    "verdict, then fails with its own error",
    "[core][loop]") {
  testing::Watchdog watchdog("background loop: root cause", 30s);
  LoopJob job(1);
  job.executor().FailOn("w");
  std::vector<float> w(4, 1.0f);
  Outcome failed;
  REQUIRE(job.Allreduce("w", &w, failed.callback()).ok());
  // The loop waits up to min(T/4, 1 s) of its clock for an Abort that names the real culprit.
  std::this_thread::sleep_for(200ms);
  CHECK(failed.calls() == 0);
  job.Advance(1s);
  const Status s = failed.Wait();
  CHECK(s.code() == StatusCode::kUnavailable);
  CHECK(s.message() == "allreduce 'w': rank 1 closed");
  CHECK(job.loop().Stop().message() == s.message());
}

TEST_CASE("The loop's states allow exactly the documented transitions", "[core][loop]") {
  using S = LoopState;
  const std::vector<S> all = {S::kRunning,   S::kStopRequested, S::kDraining,
                              S::kFinishing, S::kAborted,       S::kDone};
  const std::set<std::pair<S, S>> allowed = {
      {S::kRunning, S::kStopRequested}, {S::kStopRequested, S::kDraining},
      {S::kDraining, S::kFinishing},    {S::kDraining, S::kDone},
      {S::kFinishing, S::kDone},        {S::kAborted, S::kDone},
      {S::kRunning, S::kAborted},       {S::kStopRequested, S::kAborted},
      {S::kDraining, S::kAborted},      {S::kFinishing, S::kAborted},
  };
  for (S from : all) {
    for (S to : all) {
      INFO(LoopStateName(from) << " -> " << LoopStateName(to));
      CHECK(LoopTransitionAllowed(from, to) == (allowed.count({from, to}) == 1));
    }
  }
  CHECK(Serving(S::kFinishing));
  CHECK_FALSE(Serving(S::kAborted));
  CHECK_FALSE(Serving(S::kDone));
}
