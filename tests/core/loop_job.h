// The background loop's test job (tests/core/background_loop*_test.cc): rank 0's BackgroundLoop
// with a real in-process controller reached through LocalControlChannel (ranks 1.. driven by
// hand through the controller's handler), a recording executor (or one that completes ops on
// its own thread) instead of the data plane, and a manual clock. Each class is thread-safe
// where its comment says the loop's thread and the test's both call it.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "controller/controller.h"
#include "core/loop/background_loop.h"
#include "transport/local/local_control_channel.h"

namespace kolo::testing {

using namespace std::chrono_literals;

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

}  // namespace kolo::testing
