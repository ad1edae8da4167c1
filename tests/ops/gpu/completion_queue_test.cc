// CompletionQueue against the simulated device: ops complete in order and only after their
// event; a failure calls on_fatal once and holds the rest until Interrupt; the deadline comes
// from the injected clock.
#include "ops/gpu/completion_queue.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <vector>

#include "tests/support/sim_gpu/sim_device.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::gpu;
using namespace std::chrono_literals;

namespace {

// A stream, events and device memory on a slow simulated device, freed at the end.
class Rig {
 public:
  Rig() : device_(Slow()) {
    stream_ = *device_.CreateStream(true);
    buffer_ = *device_.Malloc(1 << 16);
  }
  ~Rig() {
    for (EventHandle e : events_) device_.DestroyEvent(e).IgnoreError();
    device_.DestroyStream(stream_).IgnoreError();
    device_.Free(buffer_).IgnoreError();
  }
  sim::SimDevice& device() { return device_; }
  StreamHandle stream() const { return stream_; }

  EventHandle Event() {
    events_.push_back(*device_.CreateEvent(true));
    return events_.back();
  }
  // Copies `in` to the device and back into `out` on the stream; returns the event after it.
  EventHandle RoundTrip(const std::vector<float>& in, std::vector<float>* out) {
    const size_t bytes = in.size() * sizeof(float);
    REQUIRE(device_.MemcpyAsync(buffer_, in.data(), bytes, CopyKind::kHostToDevice, stream_).ok());
    REQUIRE(
        device_.MemcpyAsync(out->data(), buffer_, bytes, CopyKind::kDeviceToHost, stream_).ok());
    EventHandle e = Event();
    REQUIRE(device_.RecordEvent(e, stream_).ok());
    return e;
  }

 private:
  static sim::SimDevice::Options Slow() {
    sim::SimDevice::Options options;
    options.op_delay = 5ms;
    return options;
  }
  sim::SimDevice device_;
  StreamHandle stream_ = nullptr;
  void* buffer_ = nullptr;
  std::vector<EventHandle> events_;
};

// Records each `done` in order.
struct Log {
  std::mutex mu;
  std::vector<std::pair<std::string, Status>> done;
  Executor::Done Recorder(const std::string& name, std::function<void()> check = {}) {
    return [this, name, check](const Status& s) {
      if (check) check();
      std::lock_guard<std::mutex> lock(mu);
      done.emplace_back(name, s);
    };
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return done.size();
  }
  bool WaitFor(size_t n, std::chrono::milliseconds limit = 10s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (size() < n) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
};

}  // namespace

TEST_CASE("Ops complete in order, each only once its device work has", "[gpu-sim][completion]") {
  testing::Watchdog watchdog("completion queue: order", 30s);
  Rig rig;
  Log log;
  CompletionQueue::Config config;
  CompletionQueue queue(&rig.device(), config, {}, {}, MakeLogger(0, "gpu", spdlog::level::warn));
  std::vector<std::vector<float>> in, out;
  for (int i = 0; i < 4; ++i) {
    in.emplace_back(1000, static_cast<float>(i + 1));
    out.emplace_back(1000, 0.0f);
  }
  for (int i = 0; i < 4; ++i) {
    CompletionQueue::Item item;
    item.what = "op " + std::to_string(i);
    item.finished = rig.RoundTrip(in[i], &out[i]);
    // The result is in place when done runs.
    item.done = log.Recorder(item.what, [&, i] { CHECK(out[i] == in[i]); });
    queue.Push(std::move(item));
  }
  REQUIRE(log.WaitFor(4));
  for (int i = 0; i < 4; ++i) {
    CHECK(log.done[i].first == "op " + std::to_string(i));
    CHECK(log.done[i].second.ok());
  }
  CHECK(queue.pending() == 0);
}

TEST_CASE(
    "A device op past the deadline fails once, aborts once, and holds the rest until "
    "Interrupt",
    "[gpu-sim][completion]") {
  testing::Watchdog watchdog("completion queue: deadline", 30s);
  // Before the rig: the stream's work reads it until the device is gone.
  std::atomic<bool> release{false};
  Rig rig;
  ManualClock clock;
  Log log;
  std::atomic<int> fatal{0};
  CompletionQueue::Config config;
  config.clock = &clock;
  config.timeout_seconds = 30;
  CompletionQueue queue(
      &rig.device(), config, {}, [&](const Status&) { ++fatal; },
      MakeLogger(0, "gpu", spdlog::level::off));
  // A kernel that spins until released (a collective waiting for a dead peer).
  REQUIRE(rig.device()
              .Enqueue(rig.stream(),
                       [&] {
                         while (!release) std::this_thread::sleep_for(1ms);
                         return Status::Ok();
                       })
              .ok());
  EventHandle hung = rig.Event();
  REQUIRE(rig.device().RecordEvent(hung, rig.stream()).ok());
  EventHandle behind = rig.Event();
  REQUIRE(rig.device().RecordEvent(behind, rig.stream()).ok());
  CompletionQueue::Item first{"allreduce 'w'", hung, {}, nullptr, log.Recorder("w"), {}};
  CompletionQueue::Item second{"allreduce 'b'", behind, {}, nullptr, log.Recorder("b"), {}};
  queue.Push(std::move(first));
  queue.Push(std::move(second));
  std::this_thread::sleep_for(50ms);
  CHECK(log.size() == 0);
  clock.Advance(30s);
  REQUIRE(log.WaitFor(1));
  CHECK(log.done[0].second.code() == StatusCode::kDeadlineExceeded);
  CHECK(log.done[0].second.message() ==
        "allreduce 'w': the device did not finish it within 30 s (KOLO_TIMEOUT_SECONDS)");
  CHECK(fatal == 1);
  // The op behind it waits for the loop's verdict.
  std::this_thread::sleep_for(50ms);
  CHECK(log.size() == 1);
  queue.Interrupt(Aborted("rank 1 lost"));
  REQUIRE(log.WaitFor(2));
  CHECK(log.done[1].second == Aborted("rank 1 lost"));
  CHECK(fatal == 1);
  release = true;
}

TEST_CASE("An unhealthy communicator fails the op it was polled for, naming it",
          "[gpu-sim][completion]") {
  testing::Watchdog watchdog("completion queue: health", 30s);
  // Before the rig: the stream's work reads it until the device is gone.
  std::atomic<bool> release{false};
  Rig rig;
  Log log;
  std::atomic<int> fatal{0};
  CompletionQueue queue(
      &rig.device(), CompletionQueue::Config{},
      [&]() -> Status {
        return Unavailable(
            "ncclRemoteError (6): remote process exited or there was a network "
            "error");
      },
      [&](const Status&) { ++fatal; }, MakeLogger(0, "gpu", spdlog::level::off));
  REQUIRE(rig.device()
              .Enqueue(rig.stream(),
                       [&] {
                         while (!release) std::this_thread::sleep_for(1ms);
                         return Status::Ok();
                       })
              .ok());
  EventHandle e = rig.Event();
  REQUIRE(rig.device().RecordEvent(e, rig.stream()).ok());
  queue.Push(CompletionQueue::Item{"broadcast 'p'", e, {}, nullptr, log.Recorder("p"), {}});
  REQUIRE(log.WaitFor(1));
  CHECK(log.done[0].second.message() ==
        "broadcast 'p': ncclRemoteError (6): remote process exited or there was a network error");
  CHECK(fatal == 1);
  release = true;
}

TEST_CASE("A device error surfaces at the op's event", "[gpu-sim][completion]") {
  testing::Watchdog watchdog("completion queue: device error", 30s);
  Rig rig;
  Log log;
  CompletionQueue queue(&rig.device(), CompletionQueue::Config{}, {}, {},
                        MakeLogger(0, "gpu", spdlog::level::off));
  REQUIRE(rig.device()
              .Enqueue(rig.stream(), [] { return Internal("kernel failed: illegal address"); })
              .ok());
  EventHandle e = rig.Event();
  REQUIRE(rig.device().RecordEvent(e, rig.stream()).ok());
  bool released = false;
  queue.Push(CompletionQueue::Item{
      "allgather 'g'", e, {}, nullptr, log.Recorder("g"), [&] { released = true; }});
  REQUIRE(log.WaitFor(1));
  CHECK(log.done[0].second.message() == "allgather 'g': kernel failed: illegal address");
  std::this_thread::sleep_for(10ms);
  CHECK(released);
}

TEST_CASE("Timeline phases are measured by events and nest inside the op",
          "[gpu-sim][completion]") {
  testing::Watchdog watchdog("completion queue: phases", 30s);
  Rig rig;
  Log log;
  struct Recorder : PhaseObserver {
    std::mutex mu;
    std::vector<std::tuple<std::string, Clock::TimePoint, Clock::TimePoint>> phases;
    void OnPhase(const char* name, Clock::TimePoint start, Clock::TimePoint end) override {
      std::lock_guard<std::mutex> lock(mu);
      phases.emplace_back(name, start, end);
    }
  } observer;
  CompletionQueue queue(&rig.device(), CompletionQueue::Config{}, {}, {},
                        MakeLogger(0, "gpu", spdlog::level::off));
  std::vector<float> in(100, 2.0f), out(100, 0.0f);
  EventHandle e0 = rig.Event(), e1 = rig.Event(), e2 = rig.Event();
  REQUIRE(rig.device().RecordEvent(e0, rig.stream()).ok());
  void* dev = *rig.device().Malloc(400);
  REQUIRE(
      rig.device().MemcpyAsync(dev, in.data(), 400, CopyKind::kHostToDevice, rig.stream()).ok());
  REQUIRE(rig.device().RecordEvent(e1, rig.stream()).ok());
  REQUIRE(
      rig.device().MemcpyAsync(out.data(), dev, 400, CopyKind::kDeviceToHost, rig.stream()).ok());
  REQUIRE(rig.device().RecordEvent(e2, rig.stream()).ok());
  CompletionQueue::Item item;
  item.what = "allreduce 'x'";
  item.finished = e2;
  item.phases = {{"MEMCPY_IN_FUSION_BUFFER", e0, e1}, {"MEMCPY_OUT_FUSION_BUFFER", e1, e2}};
  item.observer = &observer;
  item.done = log.Recorder("x");
  queue.Push(std::move(item));
  REQUIRE(log.WaitFor(1));
  std::lock_guard<std::mutex> lock(observer.mu);
  REQUIRE(observer.phases.size() == 2);
  CHECK(std::get<0>(observer.phases[0]) == "MEMCPY_IN_FUSION_BUFFER");
  CHECK(std::get<1>(observer.phases[0]) <= std::get<2>(observer.phases[0]));
  CHECK(std::get<2>(observer.phases[0]) <= std::get<1>(observer.phases[1]) + 1ms);
  CHECK(std::get<2>(observer.phases[1]) - std::get<1>(observer.phases[0]) >= 5ms);  // 2 delayed ops
  CHECK(rig.device().Free(dev).ok());
}

TEST_CASE("Ops still pending when the queue is destroyed fail with shutdown",
          "[gpu-sim][completion]") {
  testing::Watchdog watchdog("completion queue: shutdown", 30s);
  // Before the rig: the stream's work reads it until the device is gone.
  std::atomic<bool> release{false};
  Rig rig;
  Log log;
  {
    CompletionQueue queue(&rig.device(), CompletionQueue::Config{}, {}, {},
                          MakeLogger(0, "gpu", spdlog::level::off));
    REQUIRE(rig.device()
                .Enqueue(rig.stream(),
                         [&] {
                           while (!release) std::this_thread::sleep_for(1ms);
                           return Status::Ok();
                         })
                .ok());
    EventHandle e = rig.Event();
    REQUIRE(rig.device().RecordEvent(e, rig.stream()).ok());
    queue.Push(CompletionQueue::Item{"allreduce 'z'", e, {}, nullptr, log.Recorder("z"), {}});
  }
  REQUIRE(log.size() == 1);
  CHECK(log.done[0].second.code() == StatusCode::kShutdown);
  release = true;
}
