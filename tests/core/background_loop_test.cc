// BackgroundLoop on its own: a real in-process controller reached through LocalControlChannel
// (a second rank, where a test needs one, is driven by hand through the controller's handler),
// a recording executor instead of the data plane, and a manual clock, so that the stop
// deadline and the other deadlines are tested by moving time instead of racing sleeps.
#include "core/loop/background_loop.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <vector>

#include "core/loop/loop_state.h"
#include "tests/core/loop_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::testing;
using namespace std::chrono_literals;

TEST_CASE("The loop runs each op once in the controller's order and stops cleanly",
          "[core][loop]") {
  testing::Watchdog watchdog("background loop: clean run", 30s);
  LoopJob job(1);
  std::vector<float> a(4, 1.0f), b(8, 2.0f), c(3, 3.0f);
  Outcome oa, ob, oc;
  REQUIRE(job.Allreduce("a", &a, oa.callback()).ok());
  REQUIRE(job.Allreduce("b", &b, ob.callback()).ok());
  CHECK(oa.Wait().ok());
  CHECK(ob.Wait().ok());
  REQUIRE(job.Allreduce("c", &c, oc.callback()).ok());
  CHECK(oc.Wait().ok());
  std::vector<Response> ran = job.executor().ran();
  REQUIRE_FALSE(ran.empty());
  uint64_t seq = 0;
  std::vector<std::string> names;
  for (const Response& r : ran) {
    CHECK(r.seq == ++seq);  // in sequence, none skipped or repeated
    names.insert(names.end(), r.names.begin(), r.names.end());
  }
  CHECK(names == std::vector<std::string>{"a", "b", "c"});
  CHECK(job.loop().Stop().ok());
  CHECK(job.loop().Stop().ok());  // idempotent
  CHECK(oa.calls() == 1);
  std::vector<float> late(1);
  const Status refused = job.Allreduce("late", &late, [](const Status&) {});
  CHECK(refused.code() == StatusCode::kShutdown);
}

TEST_CASE("A task lent the data plane runs on its caller's thread while no response runs",
          "[core][loop]") {
  testing::Watchdog watchdog("background loop: RunWithDataPlane", 30s);
  LoopJob job(1);
  std::promise<void> inside, release;
  std::shared_future<void> released = release.get_future().share();
  std::thread::id task_thread;
  Status lent;  // Catch2's assertions are not thread-safe: checked after the join
  std::thread borrower([&] {
    lent = job.loop().RunWithDataPlane([&] {
      task_thread = std::this_thread::get_id();
      inside.set_value();
      released.wait_for(10s);
    });
  });
  REQUIRE(inside.get_future().wait_for(10s) == std::future_status::ready);
  std::vector<float> a(4, 1.0f);
  Outcome oa;
  REQUIRE(job.Allreduce("a", &a, oa.callback()).ok());
  // Negotiated at once (one rank), but not run while the task holds the data plane.
  std::this_thread::sleep_for(300ms);
  CHECK(job.executor().ran().empty());
  CHECK(oa.calls() == 0);
  release.set_value();
  CHECK(oa.Wait().ok());
  const std::thread::id borrower_thread = borrower.get_id();
  borrower.join();
  CHECK(lent.ok());
  CHECK(task_thread == borrower_thread);
  CHECK(job.executor().ran().size() == 1);

  // From a callback (the background thread) it is refused; after Stop() it still runs.
  std::promise<Status> from_callback;
  std::vector<float> b(4, 1.0f);
  REQUIRE(job.Allreduce("b", &b,
                        [&](const Status&) {
                          from_callback.set_value(job.loop().RunWithDataPlane([] {}));
                        })
              .ok());
  std::future<Status> refused = from_callback.get_future();
  REQUIRE(refused.wait_for(10s) == std::future_status::ready);
  const Status r = refused.get();
  CHECK(r.code() == StatusCode::kFailedPrecondition);
  CHECK(r.message() == "this call may not be made from a kolo callback");
  REQUIRE(job.loop().Stop().ok());
  bool ran = false;
  CHECK(job.loop().RunWithDataPlane([&] { ran = true; }).ok());
  CHECK(ran);
}

TEST_CASE("A blocking caller drives its own op when the loop is idle, and only then",
          "[core][loop]") {
  testing::Watchdog watchdog("background loop: Drive", 30s);
  LoopJob job(1);
  // Drive declines while the loop's thread is in a pass of its own, and at start that thread
  // has one coming (the answer to its clock ping): one op through that thread first drains
  // it, and RunWithDataPlane returns once that thread let go of the loop to sleep.
  std::vector<float> warm(4, 1.0f);
  Outcome warmed;
  REQUIRE(job.Allreduce("warm", &warm, warmed.callback()).ok());
  REQUIRE(warmed.Wait().ok());
  REQUIRE(job.loop().RunWithDataPlane([] {}).ok());
  const size_t ran_before = job.executor().ran().size();
  std::vector<float> a(4, 1.0f);
  std::atomic<bool> done{false};
  Status status;
  bool marked = false;  // the thread counted as a kolo thread while the callback ran
  std::thread::id callback_thread;
  auto finished = [&] { return done.load(); };
  {
    TensorQueue::QuietScope quiet;  // as Runtime::Blocking enqueues
    REQUIRE(job.Allreduce("a", &a,
                          [&](const Status& s) {
                            status = s;
                            marked = BackgroundLoop::IsBackgroundThread();
                            callback_thread = std::this_thread::get_id();
                            done = true;
                          })
                .ok());
  }
  REQUIRE(job.loop().Drive(finished, 10s));
  REQUIRE(done);
  CHECK(status.ok());
  CHECK(marked);
  CHECK(callback_thread == std::this_thread::get_id());
  CHECK_FALSE(BackgroundLoop::IsBackgroundThread());
  CHECK(job.executor().ran().size() == ran_before + 1);

  // Nothing to drive with a zero budget, or with more than the caller's op in flight (another
  // op's callback must not run on this thread): the background thread runs those.
  CHECK_FALSE(job.loop().Drive([] { return false; }, 0us));
  std::vector<float> b(4, 1.0f), c(4, 1.0f);
  Outcome ob, oc;
  std::promise<void> inside, release;
  std::shared_future<void> released = release.get_future().share();
  // Holds the loop's work, so b stays in flight.
  Status held;
  std::thread holder([&] {
    held = job.loop().RunWithDataPlane([&] {
      inside.set_value();
      released.wait_for(10s);
    });
  });
  REQUIRE(inside.get_future().wait_for(10s) == std::future_status::ready);
  REQUIRE(job.Allreduce("b", &b, ob.callback()).ok());
  CHECK_FALSE(job.loop().Drive([&] { return ob.calls() > 0; }, 1s));  // the loop is held
  release.set_value();
  holder.join();
  CHECK(held.ok());
  CHECK(ob.Wait().ok());
  {
    TensorQueue::QuietScope quiet;  // the loop sleeps on: c and e stay in flight
    REQUIRE(job.Allreduce("c", &c, oc.callback()).ok());
    REQUIRE(job.Allreduce("e", &b, [](const Status&) {}).ok());
  }
  CHECK_FALSE(job.loop().Drive([&] { return oc.calls() > 0; }, 1s));  // two in flight
  job.Advance(0ns);  // wakes the loop, as RuntimeImpl::DriveOrSpin does when Drive declines
  CHECK(oc.Wait().ok());
  // From a callback it never drives.
  std::vector<float> d(4, 1.0f);
  std::promise<bool> from_callback;
  REQUIRE(job.Allreduce("d", &d,
                        [&](const Status&) {
                          from_callback.set_value(job.loop().Drive([] { return false; }, 1s));
                        })
              .ok());
  std::future<bool> drove = from_callback.get_future();
  REQUIRE(drove.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(drove.get());
}
