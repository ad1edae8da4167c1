// The Controller's use of the stall inspector: what it logs and broadcasts, and when; its
// sequencer thread waking for a stall deadline. Texts themselves: stall_inspector_test.cc.
#include <spdlog/sinks/ostream_sink.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "controller/controller.h"
#include "core/config/config_table.h"
#include "tests/controller/controller_job.h"
#include "tests/controller/recording_outbox.h"
#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using namespace std::chrono_literals;
using testing::Full;
using testing::Job;
using testing::MakeHello;
using testing::Meta;
using testing::RecordingOutbox;
using testing::Requests;
using testing::TestOptions;
using Lines = std::vector<std::string>;

// A logger whose lines ("warning: <text>") the test reads back.
struct CapturedLog {
  CapturedLog() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
    sink->set_pattern("%l: %v");
    logger = std::make_shared<spdlog::logger>("controller", sink);
    logger->set_level(spdlog::level::warn);
  }
  // The lines logged since the last call.
  Lines Take() {
    Lines lines;
    std::string line;
    while (std::getline(text, line)) lines.push_back(line);
    text.clear();
    text.str("");
    return lines;
  }
  std::stringstream text;
  Logger logger;
};

Options StallOptions(int size, double check, double shutdown) {
  Options config = TestOptions(size);
  config.stall_check_seconds = check;
  config.stall_shutdown_seconds = shutdown;
  return config;
}

TEST_CASE("The controller logs one stall warning per check period while a rank lags",
          "[controller][stall]") {
  CapturedLog log;
  Job job(StallOptions(3, 60, 0), log.logger);
  job.JoinAll();
  CHECK_FALSE(job.controller.CheckStalls().has_value());  // nothing pending: no timer
  const Clock::TimePoint start = job.clock.Now();
  job.controller.OnMessage(0, Requests({Full(Meta("grad/w1"))}));
  job.controller.OnMessage(1, Requests({Full(Meta("grad/w1"))}));
  CHECK(job.controller.CheckStalls() == start + 60s);

  job.clock.Advance(59s);
  CHECK(job.controller.CheckStalls() == start + 60s);
  CHECK(log.Take().empty());
  job.clock.Advance(1s);
  CHECK(job.controller.CheckStalls() == start + 120s);
  CHECK(log.Take() ==
        Lines{"warning: stall: some ranks have not submitted tensors that others submitted 60 s "
              "or more ago (KOLO_STALL_CHECK_SECONDS): rank 2 has not submitted 'grad/w1' "
              "(waiting 60 s)"});
  for (int step = 0; step < 59; ++step) {  // the sequencer woke early, many times
    job.clock.Advance(1s);
    job.controller.CheckStalls();
  }
  CHECK(log.Take().empty());
  job.clock.Advance(1s);
  job.controller.CheckStalls();
  CHECK(log.Take().size() == 1);

  // The lagging rank catches up: the name completes and no check is due any more.
  job.controller.OnMessage(2, Requests({Full(Meta("grad/w1"))}));
  job.Cycle();
  CHECK_FALSE(job.controller.CheckStalls().has_value());
  CHECK(job.Same() == Lines{"responses {seq 1 allreduce float32 sum 1 1 root -1 grad/w1#1x4}"});
  CHECK_FALSE(job.controller.aborted());
  CHECK(log.Take().empty());
}

TEST_CASE("A stall past the shutdown time aborts the job on every rank",
          "[controller][stall][abort]") {
  CapturedLog log;
  Job job(StallOptions(4, 0, 30), log.logger);
  job.JoinAll();
  const Clock::TimePoint start = job.clock.Now();
  for (int rank : {0, 1, 3}) job.controller.OnMessage(rank, Requests({Full(Meta("grad/w1"))}));
  job.clock.Advance(1s);
  for (int rank : {0, 1}) job.controller.OnMessage(rank, Requests({Full(Meta("grad/w2"))}));
  CHECK(job.controller.CheckStalls() == start + 30s);

  job.clock.Advance(29s - 1ns);
  CHECK(job.controller.CheckStalls() == start + 30s);
  CHECK(job.outbox.total() == 0);
  job.clock.Advance(1ns);
  CHECK_FALSE(job.controller.CheckStalls().has_value());
  const std::string reason =
      "stalled for 30 s (KOLO_STALL_SHUTDOWN_SECONDS): rank 2 never submitted 'grad/w1'";
  CHECK(job.controller.aborted());
  CHECK(job.controller.abort_reason() == reason);
  CHECK(job.Same() == Lines{"abort: " + reason});
  CHECK(log.Take() == Lines{"error: job aborted: " + reason});

  // The job is over: no more checks, warnings or messages.
  job.clock.Advance(1000s);
  CHECK_FALSE(job.controller.CheckStalls().has_value());
  CHECK(job.outbox.Log(0).size() == 1);
  CHECK(log.Take().empty());
}

TEST_CASE("Names a departed rank announced still stall until the job shuts down",
          "[controller][stall][shutdown]") {
  CapturedLog log;
  Job job(StallOptions(2, 1, 0), log.logger);
  job.JoinAll();
  job.controller.OnMessage(0, Requests({Full(Meta("x"))}));
  job.controller.OnMessage(0, testing::Notice(WorkerMessage::Kind::kShutdown));
  job.clock.Advance(1s);
  CHECK(job.controller.CheckStalls().has_value());
  CHECK(log.Take() ==
        Lines{"warning: stall: some ranks have not submitted tensors that others submitted 1 s "
              "or more ago (KOLO_STALL_CHECK_SECONDS): rank 1 has not submitted 'x' (waiting "
              "1 s)"});
  job.controller.OnMessage(1, testing::Notice(WorkerMessage::Kind::kShutdown));
  REQUIRE(job.controller.shutdown_sent());
  job.clock.Advance(10s);
  CHECK_FALSE(job.controller.CheckStalls().has_value());
  CHECK(log.Take().empty());
}

TEST_CASE("Stall settings are validated with the variable named", "[controller][stall]") {
  // The controller reads them from Options, whose ranges are the config table's.
  Options config;
  config.stall_check_seconds = 0;
  config.stall_shutdown_seconds = 0;
  CHECK(CheckConfigRanges(config).ok());
  config.stall_check_seconds = -1;
  CHECK(CheckConfigRanges(config).message() ==
        "KOLO_STALL_CHECK_SECONDS=-1 is invalid: expected a number in [0, 86400]");
  config.stall_check_seconds = std::nan("");
  CHECK(CheckConfigRanges(config).code() == StatusCode::kInvalidArgument);
  config.stall_check_seconds = 60;
  config.stall_shutdown_seconds = std::numeric_limits<double>::infinity();
  CHECK(CheckConfigRanges(config).message() ==
        "KOLO_STALL_SHUTDOWN_SECONDS=inf is invalid: expected a number in [0, 86400]");
  config.stall_shutdown_seconds = 1e9;
  CHECK(CheckConfigRanges(config).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("The sequencer thread wakes for a stall deadline without being driven",
          "[controller][stall][thread]") {
  const int size = 3;
  RecordingOutbox outbox(size);
  const Options options = StallOptions(size, 0.02, 0.05);
  Controller controller(options, nullptr, SteadyClock::Get(),
                        MakeLogger(0, "controller", spdlog::level::off));
  controller.Attach(&outbox);
  controller.Start();
  for (int rank = 0; rank < size; ++rank) REQUIRE(controller.OnHello(MakeHello(rank, size)).ok());
  // Waits for events with a deadline, not sleeps. First a planned tensor, so that the sequencer
  // has run and most likely gone back to its untimed idle wait (nothing pending) ...
  for (int rank = 0; rank < size; ++rank) controller.OnMessage(rank, Requests({Full(Meta("w"))}));
  REQUIRE(outbox.WaitFor(0, 2, 10s));
  // ... from which a first pending name must wake it with a deadline: then the abort.
  const auto start = std::chrono::steady_clock::now();
  controller.OnMessage(1, Requests({Full(Meta("x"))}));
  REQUIRE(outbox.WaitFor(0, 3, 10s));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  controller.Stop();
  CHECK(elapsed >= 50ms);
  CHECK(controller.abort_reason() ==
        "stalled for 0.05 s (KOLO_STALL_SHUTDOWN_SECONDS): ranks 0, 2 never submitted 'x'");
  CHECK(outbox.Log(2).back() == "abort: " + controller.abort_reason());
}

}  // namespace
}  // namespace kolo::controller
