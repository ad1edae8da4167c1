// BackgroundLoop on its own: a real in-process controller reached through LocalControlChannel
// (a second rank, where a test needs one, is driven by hand through the controller's handler),
// a recording executor instead of the data plane, and a manual clock, so that the stop
// deadline and the other deadlines are tested by moving time instead of racing sleeps.
#include "core/loop/background_loop.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "controller/controller.h"
#include "core/loop/loop_state.h"
#include "tests/support/watchdog.h"
#include "transport/local/local_control_channel.h"

using namespace kolo;
using namespace std::chrono_literals;

namespace {

// Runs responses by copying each input to its output (a one-rank allreduce), records what it
// ran, and fails the tensors named in `fail`.
class RecordingExecutor final : public Executor {
 public:
  Status Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                 PhaseObserver*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ran_.push_back(response);
    for (TensorEntry* e : entries) {
      if (e->meta.name == fail_) return Unavailable("allreduce '" + fail_ + "': rank 1 closed");
      if (e->output.data != e->input.data) {
        std::memcpy(e->output.data, e->input.data, e->input.num_bytes());
      }
    }
    return Status::Ok();
  }
  std::vector<Response> ran() {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_;
  }
  void FailOn(std::string name) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_ = std::move(name);
  }

 private:
  std::mutex mu_;
  std::vector<Response> ran_;
  std::string fail_;
};

// Completes launched ops on its own thread, one at a time when the test says so (or fails
// them all once interrupted), copying each input to its output as a one-rank allreduce does.
class AsyncExecutor final : public Executor {
 public:
  AsyncExecutor() : thread_([this] { Run(); }) {}
  ~AsyncExecutor() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  Status Execute(const Response&, const std::vector<TensorEntry*>&, PhaseObserver*) override {
    return Internal("every response of this test runs asynchronously");
  }
  bool RunsAsync(const Response&) const override { return true; }
  Status Launch(const Response& response, const std::vector<TensorEntry*>& entries, PhaseObserver*,
                Done done) override {
    std::lock_guard<std::mutex> lock(mu_);
    launched_.push_back(Op{response.names, entries, std::move(done)});
    cv_.notify_all();
    return Status::Ok();
  }
  void Interrupt(const Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++interrupts_;
    interrupted_ = why;
    cv_.notify_all();
  }

  // Waits (10 s at most) until `n` ops were launched and not completed.
  bool WaitLaunched(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return launched_.size() >= n; });
  }
  // Completes the oldest launched op with `status` on the executor's thread.
  void CompleteOldest(Status status = Status::Ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    to_complete_.push_back(std::move(status));
    cv_.notify_all();
  }
  int interrupts() {
    std::lock_guard<std::mutex> lock(mu_);
    return interrupts_;
  }
  std::thread::id thread_id() const { return thread_.get_id(); }

 private:
  struct Op {
    std::vector<std::string> names;
    std::vector<TensorEntry*> entries;
    Done done;
  };
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] {
        return stopping_ || (!launched_.empty() && (!to_complete_.empty() || !interrupted_.ok()));
      });
      if (stopping_) return;
      Op op = std::move(launched_.front());
      launched_.pop_front();
      Status status = interrupted_;
      if (status.ok()) {
        status = to_complete_.front();
        to_complete_.pop_front();
      }
      lock.unlock();
      if (status.ok()) {
        for (TensorEntry* e : op.entries) {
          if (e->output.data != e->input.data) {
            std::memcpy(e->output.data, e->input.data, e->input.num_bytes());
          }
        }
      }
      op.done(status);
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> launched_;         // guarded by mu_
  std::deque<Status> to_complete_;  // guarded by mu_
  Status interrupted_;              // guarded by mu_
  int interrupts_ = 0;              // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::thread thread_;              // last
};

// The loop only interrupts the data plane on an abort; it records that.
class RecordingDataPlane final : public DataPlane {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status Exchange(int, int, StreamExchange&, const std::string&) override {
    return Internal("the loop test moves no data");
  }
  void Interrupt(const Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    interrupted_ = why;
  }
  Status interrupted() {
    std::lock_guard<std::mutex> lock(mu_);
    return interrupted_;
  }

 private:
  std::mutex mu_;
  Status interrupted_;
};

// Where the controller's messages for ranks other than 0 go: nowhere but a count.
class OtherRanks final : public ControllerOutbox {
 public:
  void Send(int rank, const ControllerMessage& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    received_.emplace_back(rank, message.kind);
  }
  int count(ControllerMessage::Kind kind) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& [rank, k] : received_) n += k == kind ? 1 : 0;
    return n;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<int, ControllerMessage::Kind>> received_;
};

// One callback's outcome, waited for with a deadline.
class Outcome {
 public:
  Callback callback() {
    return [this](const Status& s) {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = s;
      ++calls_;
      cv_.notify_all();
    };
  }
  // The status, once the callback ran; fails the test if it does not within 10 s.
  Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    REQUIRE(cv_.wait_for(lock, 10s, [&] { return calls_ > 0; }));
    return status_;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Status status_;
  int calls_ = 0;
};

// Rank 0 of a `size`-rank job: its loop, the controller, and ranks 1.. as far as the test
// drives them by hand.
class LoopJob {
 public:
  // `executor`: runs the responses (the recording one when null); must outlive the job.
  explicit LoopJob(int size, Executor* executor = nullptr) : queue_(&wakeup_) {
    options_.size = size;
    options_.fusion_threshold_bytes = 1 << 20;
    options_.timeout_seconds = 30;
    options_.start_timeout_seconds = 0;  // the test drives the start by hand
    controller_ = std::make_unique<controller::Controller>(
        options_, nullptr, SteadyClock::Get(), MakeLogger(0, "controller", spdlog::level::warn));
    channel_ = std::make_unique<LocalControlChannel>(0, controller_.get(), &others_, "gen-1");
    controller_->Attach(channel_.get());
    controller_->Start();
    for (int r = 1; r < size; ++r) {
      Hello hello;
      hello.rank = r;
      hello.size = size;
      hello.host = "localhost";
      hello.data_address = "127.0.0.1:" + std::to_string(1000 + r);
      REQUIRE(controller_->OnHello(hello).ok());
    }
    Hello hello;
    hello.rank = 0;
    hello.size = size;
    hello.host = "localhost";
    hello.data_address = "127.0.0.1:1000";
    REQUIRE(
        channel_
            ->Connect(hello, std::chrono::steady_clock::now() + 10s, [this] { wakeup_.Notify(); })
            .ok());
    BackgroundLoop::Wiring wiring;
    wiring.clock = &clock_;
    loop_ =
        std::make_unique<BackgroundLoop>(options_, wiring, &queue_, &wakeup_, channel_.get(),
                                         executor != nullptr ? executor : &executor_, &data_plane_,
                                         nullptr, MakeLogger(0, "loop", spdlog::level::warn));
    loop_->Start();
  }

  ~LoopJob() {
    loop_->Stop().IgnoreError();
    controller_->Stop();
  }

  // An allreduce of `count` floats named `name` from rank 0.
  Status Allreduce(const std::string& name, std::vector<float>* data, Callback done) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta.name = name;
    entry->meta.op = OpType::kAllreduce;
    entry->meta.shape = {static_cast<int64_t>(data->size())};
    entry->input = {data->data(), DataType::kFloat32, entry->meta.shape, Device::Cpu()};
    entry->output = entry->input;
    entry->callback = std::move(done);
    return queue_.Enqueue(std::move(entry));
  }

  // Rank r announces `name` as rank 0 does in Allreduce.
  void AnnounceFrom(int r, const std::string& name, int64_t count) {
    WorkerMessage batch;
    batch.kind = WorkerMessage::Kind::kRequests;
    Request request;
    request.meta.name = name;
    request.meta.op = OpType::kAllreduce;
    request.meta.shape = {count};
    batch.requests.push_back(request);
    controller_->OnMessage(r, batch);
  }

  void ShutdownNoticeFrom(int r) {
    WorkerMessage notice;
    notice.kind = WorkerMessage::Kind::kShutdown;
    controller_->OnMessage(r, notice);
  }

  // A message from the controller to rank 0, as if the controller sent it.
  void Deliver(const ControllerMessage& message) { channel_->Send(0, message); }

  // Moves the loop's clock and wakes it, so it sees the new time now.
  void Advance(std::chrono::nanoseconds d) {
    clock_.Advance(d);
    wakeup_.Notify();
  }

  // Stop() on another thread, as a training thread calls it while the loop keeps running.
  std::future<Status> StopAsync() {
    return std::async(std::launch::async, [this] { return loop().Stop(); });
  }

  // Stop() when something keeps the job from ending: it must not return while the manual clock
  // stands still, nor before 30 s (KOLO_TIMEOUT_SECONDS) of it passed, and must at 30 s.
  Status StopAtDeadline() {
    std::future<Status> stopped = StopAsync();
    CHECK(stopped.wait_for(300ms) == std::future_status::timeout);  // real time passes
    Advance(29s);
    CHECK(stopped.wait_for(300ms) == std::future_status::timeout);
    Advance(1s);
    REQUIRE(stopped.wait_for(10s) == std::future_status::ready);
    return stopped.get();
  }

  BackgroundLoop& loop() { return *loop_; }
  TensorQueue& queue() { return queue_; }
  RecordingExecutor& executor() { return executor_; }
  RecordingDataPlane& data_plane() { return data_plane_; }
  OtherRanks& others() { return others_; }

 private:
  Options options_;  // rank 0 of `size`; the controller's and the loop's
  ManualClock clock_;
  Wakeup wakeup_;
  TensorQueue queue_;
  RecordingExecutor executor_;
  RecordingDataPlane data_plane_;
  OtherRanks others_;
  std::unique_ptr<controller::Controller> controller_;
  std::unique_ptr<LocalControlChannel> channel_;
  std::unique_ptr<BackgroundLoop> loop_;
};

}  // namespace

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
