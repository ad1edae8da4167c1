// AsyncOps on its own: an executor that keeps what it launched, completed by the test on its
// own thread (standing in for the executor's completion thread), under a manual clock.
#include "core/loop/async_ops.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <vector>

#include "core/loop/callback_thread.h"

using namespace kolo;
using namespace std::chrono_literals;

namespace {

// Keeps every launched op's `done`; Interrupt fails them all at once, as a real executor's
// completion thread would soon.
class HeldExecutor final : public Executor {
 public:
  Status Execute(const Response&, const std::vector<TensorEntry*>&, PhaseObserver*) override {
    return Internal("every op of this test is launched");
  }
  bool RunsAsync(const Response&) const override { return true; }
  Status Launch(const Response&, const std::vector<TensorEntry*>&, PhaseObserver*,
                Done done) override {
    if (!refuse.ok()) return refuse;
    held.push_back(std::move(done));
    return Status::Ok();
  }
  void Interrupt(const Status& why) override {
    ++interrupts;
    if (ignore_interrupt) return;
    std::vector<Done> failing;
    failing.swap(held);
    for (Done& done : failing) done(why);
  }
  std::vector<Done> held;
  Status refuse;
  int interrupts = 0;
  bool ignore_interrupt = false;
};

class Harness {
 public:
  Harness()
      : queue_(&wakeup_),
        completer_(&queue_, nullptr, &clock, MakeLogger(0, "loop", spdlog::level::off)),
        async(&executor, &completer_, nullptr, &wakeup_, &clock, /*timeout_seconds=*/30,
              MakeLogger(0, "loop", spdlog::level::off)) {}

  // Enqueues an allreduce named `name` whose callback records its status and whether it ran
  // on a thread marked as kolo's; returns its entry.
  TensorEntry* Enqueue(const std::string& name) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta.name = name;
    entry->meta.shape = {1};
    entry->input = {&value_, DataType::kFloat32, {1}, Device::Cpu()};
    entry->output = entry->input;
    entry->callback = [this, name](const Status& s) {
      outcomes[name].push_back(s);
      marked[name] = OnCallbackThread();
    };
    TensorEntry* raw = entry.get();
    REQUIRE(queue_.Enqueue(std::move(entry)).ok());
    return raw;
  }
  Status Launch(const std::string& name) {
    Response response;
    response.names = {name};
    response.num_elements = {1};
    return async.Launch(response, {queue_.Find(name)}, StandIns());
  }

  TensorQueue& queue() { return queue_; }
  const OpCompleter& completer() const { return completer_; }

  ManualClock clock;
  HeldExecutor executor;
  std::map<std::string, std::vector<Status>> outcomes;
  std::map<std::string, bool> marked;

 private:
  float value_ = 1;
  Wakeup wakeup_;
  TensorQueue queue_;
  OpCompleter completer_;

 public:
  AsyncOps async;
};

}  // namespace

TEST_CASE(
    "A launched op keeps its name until its completion, which runs the callback as a "
    "kolo thread",
    "[core][loop][async]") {
  Harness h;
  TensorEntry* x = h.Enqueue("x");
  REQUIRE(h.Launch("x").ok());
  CHECK(x->in_flight);
  CHECK(h.queue().RemoveAll().empty());  // an abort leaves it to its executor
  CHECK(h.queue().InFlight() == 1);
  REQUIRE(h.executor.held.size() == 1);
  h.executor.held[0](Status::Ok());
  REQUIRE(h.outcomes["x"].size() == 1);
  CHECK(h.outcomes["x"][0].ok());
  CHECK(h.marked["x"]);
  CHECK_FALSE(OnCallbackThread());  // restored afterwards
  CHECK(h.queue().InFlight() == 0);
  CHECK(h.async.TakeFailures().empty());
  CHECK(h.async.AwaitInFlight([](Clock::TimePoint) { FAIL("nothing is in flight"); }).ok());
}

TEST_CASE("A failed device op is handed back to the loop, which completes it",
          "[core][loop][async]") {
  Harness h;
  TensorEntry* x = h.Enqueue("x");
  REQUIRE(h.Launch("x").ok());
  const Status lost = Unavailable("allreduce 'x': ncclRemoteError");
  h.executor.held[0](lost);
  CHECK(h.outcomes["x"].empty());  // not on the completion thread
  std::vector<AsyncOps::Failure> failures = h.async.TakeFailures();
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].status() == lost);
  CHECK(x->in_flight);
  failures[0].Reclaim();
  CHECK_FALSE(x->in_flight);
  const Status root = Aborted("rank 1 lost");
  failures[0].Complete(h.completer(), root);
  REQUIRE(h.outcomes["x"].size() == 1);
  CHECK(h.outcomes["x"][0] == root);
  CHECK(h.async.TakeFailures().empty());
}

TEST_CASE("An op the executor refuses to launch is not in flight", "[core][loop][async]") {
  Harness h;
  TensorEntry* x = h.Enqueue("x");
  h.executor.refuse = Internal("no device");
  CHECK(h.Launch("x") == h.executor.refuse);
  CHECK_FALSE(x->in_flight);
  CHECK(h.async.AwaitInFlight([](Clock::TimePoint) { FAIL("nothing is in flight"); }).ok());
}

TEST_CASE("At the end, ops still in flight after the timeout are interrupted and fail with it",
          "[core][loop][async]") {
  Harness h;
  h.Enqueue("x");
  REQUIRE(h.Launch("x").ok());
  int waits = 0;
  Status interrupt;
  const Status ended = h.async.AwaitInFlight([&](Clock::TimePoint deadline) {
    ++waits;
    h.clock.Advance(deadline - h.clock.Now());  // nothing completes before the deadline
    for (const AsyncOps::Failure& failure : h.async.TakeFailures()) {
      CHECK(h.async.ShutdownInterrupt(failure.status()));
      failure.Reclaim();
      failure.Complete(h.completer(), failure.status());
    }
  });
  CHECK(h.executor.interrupts == 1);
  CHECK(ended.code() == StatusCode::kDeadlineExceeded);
  CHECK(ended.message() ==
        "shutdown: 1 device op(s) still in flight 30 s (KOLO_TIMEOUT_SECONDS) after the job ended");
  REQUIRE(h.outcomes["x"].size() == 1);
  CHECK(h.outcomes["x"][0] == ended);
  CHECK(waits == 2);
}
