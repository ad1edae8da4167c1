#include "controller/controller.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/config/config_table.h"
#include "tests/controller/controller_job.h"
#include "tests/controller/recording_outbox.h"
#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using namespace std::chrono_literals;
using testing::ById;
using testing::Full;
using testing::Job;
using testing::MakeHello;
using testing::Meta;
using testing::Notice;
using testing::RecordingOutbox;
using testing::Requests;
using Lines = std::vector<std::string>;

TEST_CASE("Welcome goes to every rank once all have said hello", "[controller]") {
  const int size = GENERATE(1, 2, 5);
  Job job(size);
  for (int rank = size - 1; rank >= 0; --rank) {
    CHECK(job.outbox.total() == 0);
    REQUIRE(job.controller.OnHello(MakeHello(rank, size)).ok());
  }
  std::string expected = "welcome";
  for (int r = 0; r < size; ++r) {
    expected +=
        " [" + std::to_string(r) + " h" + std::to_string(r) + " a" + std::to_string(r) + "]";
  }
  CHECK(job.Same() == Lines{expected});
}

TEST_CASE("Duplicate and out-of-range ranks are refused without harming the job", "[controller]") {
  Job job(3);
  REQUIRE(job.controller.OnHello(MakeHello(0, 3)).ok());
  CHECK(job.controller.OnHello(MakeHello(0, 3)).message() == "rank 0 is already connected");
  CHECK(job.controller.OnHello(MakeHello(3, 3)).message() ==
        "rank 3 is out of range for a job of 3 ranks");
  job.controller.OnStreamClosed(2, Unavailable("refused"));  // never admitted: ignored
  job.controller.OnMessage(2, Requests({Full(Meta("x"))}));  // likewise
  REQUIRE(job.controller.OnHello(MakeHello(1, 3)).ok());
  REQUIRE(job.controller.OnHello(MakeHello(2, 3)).ok());
  CHECK_FALSE(job.controller.aborted());
  CHECK(job.outbox.Log(2).size() == 1);  // the Welcome
}

TEST_CASE("A Hello after the job is over is turned away for now, for the next job",
          "[controller]") {
  const bool aborted = GENERATE(false, true);
  Job job(3);
  job.JoinAll();
  if (aborted) {
    job.controller.OnMessage(1, Notice(WorkerMessage::Kind::kAbort));
  } else {
    for (int rank = 0; rank < 3; ++rank) {
      job.controller.OnMessage(rank, Notice(WorkerMessage::Kind::kShutdown));
    }
  }
  // A rank that called init() again reached the old controller: not a duplicate of this job,
  // but too early for the next; Unavailable, so the worker tries again.
  Status again = job.controller.OnHello(MakeHello(2, 3));
  CHECK(again.code() == StatusCode::kUnavailable);
  CHECK(again.message() == std::string("this controller's job is over (") +
                               (aborted ? "aborted" : "shut down") +
                               "); the next job's controller is not up yet");
}

TEST_CASE("Ready tensors wait up to one cycle while more are half-announced, then go fused",
          "[controller]") {
  const int size = GENERATE(2, 3, 8);
  Job job(size);
  job.JoinAll();
  CHECK_FALSE(job.controller.RunCycle().has_value());  // idle: nothing to do, nothing sent
  // Rank 0 is ahead and has announced 'z' alone: more may come, so 'a' waits for company.
  job.controller.OnMessage(0, Requests({Full(Meta("z"))}));
  job.AllSend({Full(Meta("a"))});
  const Clock::TimePoint opened = job.clock.Now();
  job.clock.Advance(500us);
  job.AllSend({Full(Meta("b"))});
  auto due = job.controller.RunCycle();
  REQUIRE(due.has_value());
  CHECK(*due == opened + 1ms);  // never longer than one cycle after the first readiness
  CHECK(job.outbox.total() == 0);
  job.clock.Advance(500us);
  CHECK_FALSE(job.controller.RunCycle().has_value());
  CHECK(job.Same() == Lines{"responses {seq 1 allreduce float32 sum 1 1 root -1 a#1x4 b#2x4}"});

  // The others catch up on 'z': nothing is half-announced any more, so it goes at once, in
  // the call that made it ready, without a cycle.
  job.outbox.Clear();
  for (int rank = 1; rank < size; ++rank)
    job.controller.OnMessage(rank, Requests({Full(Meta("z"))}));
  CHECK(job.Same() == Lines{"responses {seq 2 allreduce float32 sum 1 1 root -1 z#3x4}"});

  // Ids may be used from now on; a lone repeated tensor goes at once too.
  job.outbox.Clear();
  job.AllSend({ById(2)});
  CHECK(job.Same() == Lines{"responses {seq 3 allreduce float32 sum 1 1 root -1 b#2x4}"});
}

TEST_CASE("A mismatch fails that op on every rank and the job goes on", "[controller]") {
  Job job(4, spdlog::level::trace);  // also exercises the per-cycle log lines
  job.JoinAll();
  for (int rank = 0; rank < 4; ++rank) {
    job.controller.OnMessage(
        rank, Requests({Full(Meta("grad/w1", rank == 3 ? std::vector<int64_t>{3, 2}
                                                       : std::vector<int64_t>{2, 3})),
                        Full(Meta("grad/w2"))}));
  }
  job.Cycle();
  CHECK(job.Same() == Lines{"responses {seq 1 allreduce float32 sum 1 1 root -1 grad/w1#0x0 error: "
                            "Mismatched allreduce shapes for 'grad/w1': rank 0 sent [2, 3], rank 3 "
                            "sent [3, 2]} {seq 2 allreduce float32 sum 1 1 root -1 grad/w2#1x4}"});
  CHECK_FALSE(job.controller.aborted());
}

TEST_CASE("Shutdown fails what needs the departed rank, then ends the job cleanly",
          "[controller][shutdown]") {
  Job job(3);
  job.JoinAll();
  job.controller.OnMessage(0, Requests({Full(Meta("x"))}));
  job.controller.OnMessage(2, Notice(WorkerMessage::Kind::kShutdown));
  job.controller.OnStreamClosed(2, Status::Ok());  // clean: after its notice
  job.Cycle();
  CHECK(job.Same() ==
        Lines{"responses {seq 1 allreduce float32 sum 1 1 root -1 x#0x0 error: rank 2 "
              "called shutdown() before submitting 'x'}"});
  job.outbox.Clear();
  job.controller.OnMessage(1, Requests({Full(Meta("y"))}));
  job.controller.OnMessage(0, Notice(WorkerMessage::Kind::kShutdown));
  CHECK_FALSE(job.controller.shutdown_sent());
  job.controller.OnMessage(1, Notice(WorkerMessage::Kind::kShutdown));
  // The last notice flushes the failures at once, then Shutdown; no cycle needed.
  CHECK(job.controller.shutdown_sent());
  CHECK(job.Same() ==
        Lines{"responses {seq 2 allreduce float32 sum 1 1 root -1 y#0x0 error: rank 2 "
              "called shutdown() before submitting 'y'}",
              "shutdown"});
  job.controller.OnStreamClosed(0, Unavailable("gone"));
  job.controller.OnStreamClosed(1, Status::Ok());
  CHECK_FALSE(job.controller.aborted());
  CHECK(job.outbox.Log(0).size() == 2);
}

TEST_CASE("A lost stream aborts the job once, naming the rank", "[controller][abort]") {
  Job job(3);
  job.JoinAll();
  job.controller.OnMessage(0, Requests({Full(Meta("x"))}));
  job.controller.OnStreamClosed(2, Unavailable("connection reset by peer"));
  CHECK(job.controller.aborted());
  CHECK(job.controller.abort_reason() == "rank 2 lost: connection reset by peer");
  // Later causes do not replace the first; work is refused.
  job.controller.OnStreamClosed(1, Unavailable("socket closed"));
  job.controller.OnMessage(0, Notice(WorkerMessage::Kind::kAbort, "data plane timed out"));
  job.controller.OnMessage(1, Requests({Full(Meta("x"))}));
  job.controller.OnMessage(2, Requests({Full(Meta("x"))}));
  job.Cycle();
  CHECK(job.Same() == Lines{"abort: rank 2 lost: connection reset by peer"});
  // A Hello now is for the next job (init() again after the failure): turned away for now, so
  // that the worker keeps trying until the next controller takes the port.
  CHECK(job.controller.OnHello(MakeHello(2, 3)).code() == StatusCode::kUnavailable);
}

TEST_CASE("A stream that ends without a shutdown notice is a lost rank", "[controller][abort]") {
  Job job(2);
  job.JoinAll();
  job.controller.OnStreamClosed(1, Status::Ok());
  CHECK(job.Same() == Lines{"abort: rank 1 lost: its stream closed without a shutdown notice"});
}

TEST_CASE("A worker's abort notice is broadcast with its rank", "[controller][abort]") {
  Job job(3);
  job.JoinAll();
  job.controller.OnMessage(1, Notice(WorkerMessage::Kind::kPing));
  job.controller.OnMessage(
      1, Notice(WorkerMessage::Kind::kAbort, "peer rank 2 closed the connection"));
  job.controller.OnMessage(
      2, Notice(WorkerMessage::Kind::kAbort, "peer rank 1 closed the connection"));
  CHECK(job.Same() == Lines{"abort: rank 1: peer rank 2 closed the connection"});
}

TEST_CASE("A worker's abort notice adds who had not submitted the pending names",
          "[controller][abort]") {
  // A rank whose application gave up (Runtime::AbortJob: torch.distributed's timed-out wait)
  // knows only its own side; the controller knows who announced what.
  Job job(3);
  job.JoinAll();
  job.controller.OnMessage(0, Requests({Full(Meta("x"))}));
  job.controller.OnMessage(2, Requests({Full(Meta("x"))}));
  job.controller.OnMessage(0, Notice(WorkerMessage::Kind::kAbort, "its wait timed out"));
  CHECK(job.controller.abort_reason() ==
        "rank 0: its wait timed out; at the abort, rank 1 has not submitted 'x' (waiting 0 s)");
}

TEST_CASE("Protocol errors abort the job with a message naming the rank", "[controller][abort]") {
  Job job(2);
  job.JoinAll();
  std::string expected;
  SECTION("unknown cache id") {
    job.controller.OnMessage(1, Requests({ById(9)}));
    expected = "abort: protocol error: rank 1 sent unknown cache id 9";
  }
  SECTION("a name announced twice") {
    job.controller.OnMessage(0, Requests({Full(Meta("x"))}));
    job.controller.OnMessage(0, Requests({Full(Meta("x"))}));
    expected = "abort: protocol error: rank 0 announced 'x' twice before it was ready";
  }
  SECTION("a second hello") {
    WorkerMessage hello;
    hello.kind = WorkerMessage::Kind::kHello;
    job.controller.OnMessage(1, hello);
    expected = "abort: protocol error: rank 1 sent a second Hello";
  }
  SECTION("requests after shutdown") {
    job.controller.OnMessage(1, Notice(WorkerMessage::Kind::kShutdown));
    job.controller.OnMessage(1, Requests({Full(Meta("x"))}));
    expected = "abort: protocol error: rank 1 announced 'x' after its shutdown notice";
  }
  job.Cycle();
  CHECK(job.Same() == Lines{expected});
}

TEST_CASE("Messages decided before Attach are delivered by Attach, in order", "[controller]") {
  ManualClock clock;
  RecordingOutbox outbox(2);
  const Options options = testing::TestOptions(2);
  Controller controller(options, nullptr, &clock, MakeLogger(0, "controller", spdlog::level::off));
  REQUIRE(controller.OnHello(MakeHello(0, 2)).ok());
  REQUIRE(controller.OnHello(MakeHello(1, 2)).ok());
  controller.OnMessage(0, Requests({Full(Meta("x"))}));
  controller.OnMessage(1, Requests({Full(Meta("x"))}));
  clock.Advance(1ms);
  CHECK_FALSE(controller.RunCycle().has_value());
  CHECK(outbox.total() == 0);
  controller.Attach(&outbox);
  CHECK(outbox.Log(1) == Lines{"welcome [0 h0 a0] [1 h1 a1]",
                               "responses {seq 1 allreduce float32 sum 1 1 root -1 x#1x4}"});
}

TEST_CASE("The settings the controller reads are validated with the variable named",
          "[controller]") {
  // The controller reads them from Options, whose ranges are the config table's.
  Options config;
  CHECK(CheckConfigRanges(config).ok());
  config.size = 0;
  CHECK(CheckConfigRanges(config).message() ==
        "KOLO_SIZE=0 is invalid: expected an integer in [1, 1048576]");
  config = Options{};
  config.cycle_time_ms = -1;
  CHECK(CheckConfigRanges(config).message() ==
        "KOLO_CYCLE_TIME_MS=-1 is invalid: expected a number in [0, 1000]");
  config = Options{};
  config.fusion_threshold_bytes = -5;
  CHECK_THAT(CheckConfigRanges(config).message(),
             Catch::StartsWith("KOLO_FUSION_THRESHOLD=-5 is invalid"));
  config = Options{};
  config.cache_capacity = -1;
  CHECK(CheckConfigRanges(config).message() ==
        "KOLO_CACHE_CAPACITY=-1 is invalid: expected an integer in [0, 1000000]");
}

TEST_CASE("The sequencer thread sends ready tensors without being driven", "[controller][thread]") {
  const int size = 4;
  RecordingOutbox outbox(size);
  const Options options = testing::TestOptions(size, 1 << 20, /*cycle_time_ms=*/0.5);
  Controller controller(options, nullptr, SteadyClock::Get(),
                        MakeLogger(0, "controller", spdlog::level::off));
  controller.Attach(&outbox);
  controller.Start();
  for (int rank = 0; rank < size; ++rank) REQUIRE(controller.OnHello(MakeHello(rank, size)).ok());
  for (int step = 0; step < 20; ++step) {
    for (int rank = 0; rank < size; ++rank) {
      controller.OnMessage(rank, Requests({Full(Meta("t" + std::to_string(step)))}));
    }
    // A wait for an event with a deadline, not a sleep.
    REQUIRE(outbox.WaitFor(size - 1, static_cast<size_t>(step + 2), 10s));
  }
  controller.Stop();
  controller.Stop();  // idempotent
  std::vector<ControllerMessage> received = outbox.For(0);
  REQUIRE(received.size() == 21);
  uint64_t seq = 0;
  for (size_t i = 1; i < received.size(); ++i) {
    for (const Response& r : received[i].responses) CHECK(r.seq == ++seq);
  }
  CHECK(seq == 20);
  for (int rank = 1; rank < size; ++rank) {
    CHECK(outbox.Log(rank) == outbox.Log(0));
  }
}

TEST_CASE("Ranks announcing concurrently all receive one identical, complete sequence",
          "[controller][thread]") {
  const int size = 4;
  const int num_names = 60;
  static constexpr int kStrides[size] = {1, 7, 11, 13};  // coprime with num_names
  RecordingOutbox outbox(size);
  const Options options = testing::TestOptions(size, /*fusion_threshold_bytes=*/64, 0.2);
  Controller controller(options, nullptr, SteadyClock::Get(),
                        MakeLogger(0, "controller", spdlog::level::off));
  controller.Attach(&outbox);
  controller.Start();
  for (int rank = 0; rank < size; ++rank) REQUIRE(controller.OnHello(MakeHello(rank, size)).ok());
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&controller, rank] {
      // Each rank walks the names in its own order, in batches of 1..3 requests.
      for (int i = 0; i < num_names;) {
        std::vector<Request> batch;
        for (int k = 0; k <= rank % 3 && i < num_names; ++k, ++i) {
          const int n = (i * kStrides[rank]) % num_names;  // a permutation of the names
          batch.push_back(Full(Meta("t" + std::to_string(n))));
        }
        controller.OnMessage(rank, Requests(std::move(batch)));
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  REQUIRE(outbox.WaitForNames(0, num_names, 10s));
  controller.Stop();
  std::set<std::string> names;
  uint64_t seq = 0;
  for (const ControllerMessage& m : outbox.For(0)) {
    for (const Response& r : m.responses) {
      CHECK(r.seq == ++seq);
      CHECK_FALSE(r.is_error());
      names.insert(r.names.begin(), r.names.end());
    }
  }
  CHECK(names.size() == static_cast<size_t>(num_names));
  for (int rank = 1; rank < size; ++rank) CHECK(outbox.Log(rank) == outbox.Log(0));
  CHECK_FALSE(controller.aborted());
}

}  // namespace
}  // namespace kolo::controller

namespace kolo::controller {
namespace {

TEST_CASE("A timed Ping gets a Pong to that rank only; a keepalive gets nothing",
          "[controller][clock]") {
  Job job(2);
  job.JoinAll();
  job.outbox.Clear();
  WorkerMessage ping = Notice(WorkerMessage::Kind::kPing);
  job.controller.OnMessage(1, ping);  // ping_unix_us 0: a keepalive
  CHECK(job.outbox.Log(1).empty());
  ping.ping_unix_us = 1234567;
  job.controller.OnMessage(1, ping);
  CHECK(job.outbox.Log(0).empty());
  CHECK(job.outbox.Log(1) == Lines{"pong 1234567"});
}

}  // namespace
}  // namespace kolo::controller
