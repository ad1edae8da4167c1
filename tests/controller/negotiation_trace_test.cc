// The controller's timeline events (docs/TIMELINE.md, controller process): negotiation spans,
// per-rank ticks and CYCLE instants, recorded through a TraceSink on a ManualClock.
#include "controller/negotiation_trace.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "controller/controller.h"
#include "core/trace_sink.h"
#include "tests/controller/controller_job.h"
#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using namespace std::chrono_literals;
using testing::ById;
using testing::Full;
using testing::Job;
using testing::Meta;
using testing::Notice;
using testing::Requests;
using testing::TestOptions;
using Lines = std::vector<std::string>;

// A TraceSink that keeps every event. Test thread only (the Controller records under its lock
// from the handler calls and steps the test makes).
class RecordingSink final : public TraceSink {
 public:
  bool enabled() const override { return enabled_; }
  void Record(TraceEvent event) override { events_.push_back(std::move(event)); }

  // One line per event: phase (with scope for instants), pid, 'track', name, args, and the
  // time in microseconds since `t0`, e.g. "i/t 1000000 'grad/w1' 2 @100".
  Lines Take(Clock::TimePoint t0) {
    Lines lines;
    for (const TraceEvent& e : events_) {
      std::string line(1, e.phase);
      if (e.phase == 'i') line += std::string("/") + e.scope;
      line += " " + std::to_string(e.pid) + " '" + e.track + "' " + e.name;
      if (!e.args_json.empty()) line += " " + e.args_json;
      line +=
          " @" + std::to_string(
                     std::chrono::duration_cast<std::chrono::microseconds>(e.start - t0).count());
      lines.push_back(std::move(line));
    }
    events_.clear();
    return lines;
  }
  size_t size() const { return events_.size(); }
  void set_enabled(bool enabled) { enabled_ = enabled; }

 private:
  bool enabled_ = true;
  std::vector<TraceEvent> events_;
};

Options TraceOptions(int size, bool mark_cycles) {
  Options options = TestOptions(size);
  options.timeline_mark_cycles = mark_cycles;
  return options;
}

Logger Quiet() {
  return MakeLogger(0, "controller", spdlog::level::off);
}

TEST_CASE("Op names become NEGOTIATE_ span names", "[controller][trace]") {
  CHECK(NegotiateSpanName(OpType::kAllreduce) == "NEGOTIATE_ALLREDUCE");
  CHECK(NegotiateSpanName(OpType::kReducescatter) == "NEGOTIATE_REDUCESCATTER");
}

TEST_CASE("A negotiation is a span from the first announcement to the last, with a tick per rank",
          "[controller][trace]") {
  RecordingSink sink;
  Job job(TraceOptions(3, /*mark_cycles=*/false), Quiet(), &sink);
  job.JoinAll();
  const Clock::TimePoint t0 = job.clock.Now();
  job.controller.OnMessage(1, Requests({Full(Meta("a")), Full(Meta("b"))}));
  job.clock.Advance(100us);
  job.controller.OnMessage(0, Requests({Full(Meta("b"))}));
  job.clock.Advance(100us);
  job.controller.OnMessage(2, Requests({Full(Meta("b")), Full(Meta("a"))}));
  job.clock.Advance(100us);
  job.controller.OnMessage(0, Requests({Full(Meta("a"))}));
  job.Cycle();  // no CYCLE without mark_cycles
  CHECK(sink.Take(t0) == Lines{
                             "B 1000000 'a' NEGOTIATE_ALLREDUCE @0",
                             "i/t 1000000 'a' 1 @0",
                             "B 1000000 'b' NEGOTIATE_ALLREDUCE @0",
                             "i/t 1000000 'b' 1 @0",
                             "i/t 1000000 'b' 0 @100",
                             "i/t 1000000 'b' 2 @200",
                             "E 1000000 'b' NEGOTIATE_ALLREDUCE {\"last_rank\":2} @200",
                             "i/t 1000000 'a' 2 @200",
                             "i/t 1000000 'a' 0 @300",
                             "E 1000000 'a' NEGOTIATE_ALLREDUCE {\"last_rank\":0} @300",
                         });
}

TEST_CASE("Announcements by cache id get their ticks too", "[controller][trace][cache]") {
  RecordingSink sink;
  Job job(TraceOptions(2, false), Quiet(), &sink);
  job.JoinAll();
  job.AllSend({Full(Meta("grad/w1"))});
  job.Cycle();
  job.outbox.Clear();
  const Clock::TimePoint t0 = job.clock.Now();
  sink.Take(t0);
  job.controller.OnMessage(1, Requests({ById(1)}));
  job.clock.Advance(50us);
  job.controller.OnMessage(0, Requests({ById(1)}));
  CHECK(sink.Take(t0) == Lines{
                             "B 1000000 'grad/w1' NEGOTIATE_ALLREDUCE @0",
                             "i/t 1000000 'grad/w1' 1 @0",
                             "i/t 1000000 'grad/w1' 0 @50",
                             "E 1000000 'grad/w1' NEGOTIATE_ALLREDUCE {\"last_rank\":0} @50",
                         });
  job.Cycle();
  CHECK(job.Same() == Lines{"responses {seq 2 allreduce float32 sum 1 1 root -1 grad/w1#1x4}"});
}

TEST_CASE("A mismatched name's span ends when its last rank announces", "[controller][trace]") {
  RecordingSink sink;
  Job job(TraceOptions(3, false), Quiet(), &sink);
  job.JoinAll();
  const Clock::TimePoint t0 = job.clock.Now();
  job.controller.OnMessage(2, Requests({Full(Meta("grad/w1", {3, 2}))}));
  job.controller.OnMessage(0, Requests({Full(Meta("grad/w1", {2, 3}))}));
  job.clock.Advance(10us);
  job.controller.OnMessage(1, Requests({Full(Meta("grad/w1", {2, 3}))}));
  CHECK(sink.Take(t0) == Lines{
                             "B 1000000 'grad/w1' NEGOTIATE_ALLREDUCE @0",
                             "i/t 1000000 'grad/w1' 2 @0",
                             "i/t 1000000 'grad/w1' 0 @0",
                             "i/t 1000000 'grad/w1' 1 @10",
                             "E 1000000 'grad/w1' NEGOTIATE_ALLREDUCE {\"last_rank\":1} @10",
                         });
  job.Cycle();
  CHECK_THAT(job.Same().at(0), Catch::Contains("error: Mismatched allreduce shapes"));
}

TEST_CASE("Names failed by a shutdown, a departure or an abort end with last_rank -1",
          "[controller][trace][shutdown]") {
  RecordingSink sink;
  Job job(TraceOptions(3, false), Quiet(), &sink);
  job.JoinAll();
  const Clock::TimePoint t0 = job.clock.Now();
  job.controller.OnMessage(0, Requests({Full(Meta("x"))}));
  job.controller.OnMessage(2, Requests({Full(Meta("g"))}));
  sink.Take(t0);
  job.clock.Advance(1us);
  job.controller.OnMessage(2, Notice(WorkerMessage::Kind::kShutdown));  // 'x' fails
  job.clock.Advance(1us);
  job.controller.OnMessage(1, Requests({Full(Meta("z"))}));  // fails at once
  job.clock.Advance(1us);
  job.controller.OnStreamClosed(2, Status::Ok());  // gone: 'g' fails
  CHECK(sink.Take(t0) == Lines{
                             "E 1000000 'x' NEGOTIATE_ALLREDUCE {\"last_rank\":-1} @1",
                             "B 1000000 'z' NEGOTIATE_ALLREDUCE @2",
                             "i/t 1000000 'z' 1 @2",
                             "E 1000000 'z' NEGOTIATE_ALLREDUCE {\"last_rank\":-1} @2",
                             "E 1000000 'g' NEGOTIATE_ALLREDUCE {\"last_rank\":-1} @3",
                         });
}

TEST_CASE("An abort closes the spans still open with last_rank -1", "[controller][trace][abort]") {
  RecordingSink sink;
  Job job(TraceOptions(2, false), Quiet(), &sink);
  job.JoinAll();
  const Clock::TimePoint t0 = job.clock.Now();
  job.controller.OnMessage(0, Requests({Full(Meta("p")), Full(Meta("q"))}));
  sink.Take(t0);
  job.clock.Advance(5us);
  job.controller.OnStreamClosed(1, Unavailable("connection reset"));
  CHECK(sink.Take(t0) == Lines{
                             "E 1000000 'p' NEGOTIATE_ALLREDUCE {\"last_rank\":-1} @5",
                             "E 1000000 'q' NEGOTIATE_ALLREDUCE {\"last_rank\":-1} @5",
                         });
  job.controller.OnMessage(0, Requests({Full(Meta("r"))}));  // refused: no new span
  CHECK(sink.size() == 0);
}

TEST_CASE("With mark_cycles, each planned batch is a global CYCLE instant", "[controller][trace]") {
  RecordingSink sink;
  Job job(TraceOptions(2, /*mark_cycles=*/true), Quiet(), &sink);
  job.JoinAll();
  const Clock::TimePoint t0 = job.clock.Now();
  // Rank 0 has also announced 'later', which rank 1 has not: the window stays open.
  job.controller.OnMessage(0, Requests({Full(Meta("later"))}));
  for (int rank = 0; rank < 2; ++rank) {
    job.controller.OnMessage(
        rank, Requests({Full(Meta("a")), Full(Meta("b")), Full(Meta("c", {rank == 0 ? 4 : 5}))}));
  }
  sink.Take(t0);
  CHECK(job.controller.RunCycle().has_value());  // the window is open: no batch, no CYCLE
  CHECK(sink.size() == 0);
  job.Cycle();  // a+b fused, c's error alone
  CHECK(sink.Take(t0) == Lines{"i/g 1000000 '' CYCLE {\"responses\":2,\"tensors\":3} @1000"});
  job.AllSend({ById(1)});
  sink.Take(t0);
  job.Cycle();
  CHECK(sink.Take(t0) == Lines{"i/g 1000000 '' CYCLE {\"responses\":1,\"tensors\":1} @2000"});
  CHECK_FALSE(job.controller.RunCycle().has_value());  // idle: nothing planned, no CYCLE
  CHECK(sink.size() == 0);
}

TEST_CASE("SetMarkCycles turns CYCLE instants on and off while the controller runs",
          "[controller][trace]") {
  RecordingSink sink;
  Job job(TraceOptions(2, /*mark_cycles=*/false), Quiet(), &sink);
  job.JoinAll();
  const Clock::TimePoint t0 = job.clock.Now();
  // The CYCLE lines of one batch (nothing is half-announced, so it is planned on arrival).
  auto cycles_of_a_batch = [&](Request request) {
    job.AllSend({request});
    job.Cycle();
    Lines cycles;
    for (const std::string& line : sink.Take(t0)) {
      if (line.find("CYCLE") != std::string::npos) cycles.push_back(line);
    }
    return cycles;
  };
  CHECK(cycles_of_a_batch(Full(Meta("a"))).empty());  // off, as configured
  job.controller.SetMarkCycles(true);                 // start_timeline(path, true)
  const Lines on = cycles_of_a_batch(ById(1));
  REQUIRE(on.size() == 1);
  CHECK(on[0].find("CYCLE {\"responses\":1,\"tensors\":1}") != std::string::npos);
  job.controller.SetMarkCycles(false);
  CHECK(cycles_of_a_batch(ById(1)).empty());
}

// A job that exercises every kind of event: completion, cached ids, mismatch, cycle, abort.
void RunEverything(Job* job) {
  job->JoinAll();
  job->AllSend({Full(Meta("a"))});
  job->Cycle();
  job->AllSend({ById(1)});
  for (int rank = 0; rank < job->size; ++rank) {
    job->controller.OnMessage(rank, Requests({Full(Meta("m", {rank + 1}))}));
  }
  job->Cycle();
  job->controller.OnMessage(0, Requests({Full(Meta("open"))}));
  job->controller.OnStreamClosed(1, Unavailable("gone"));
  CHECK(job->controller.aborted());
}

TEST_CASE("Nothing is recorded while tracing is off", "[controller][trace]") {
  SECTION("a sink that is not enabled") {
    RecordingSink sink;
    sink.set_enabled(false);
    Job job(TraceOptions(2, /*mark_cycles=*/true), Quiet(), &sink);
    RunEverything(&job);
    CHECK(sink.size() == 0);
  }
  SECTION("no sink") {
    Job job(TraceOptions(2, /*mark_cycles=*/true), Quiet(), nullptr);
    RunEverything(&job);
  }
}

}  // namespace
}  // namespace kolo::controller
