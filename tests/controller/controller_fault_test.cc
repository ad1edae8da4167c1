// The controller's side of the fault suite (docs/RELIABILITY.md), on a ManualClock: a lost
// rank is reported as timed out or as dead depending on how long it had been silent, and the
// rendezvous expires at the start timeout naming the ranks that never arrived.
#include <catch2/catch.hpp>
#include <chrono>

#include "tests/controller/controller_job.h"

namespace kolo::controller::testing {
namespace {

using namespace std::chrono_literals;
using Lines = Job::Lines;

Options FaultOptions(int size) {
  Options config = TestOptions(size);
  config.timeout_seconds = 2;
  config.start_timeout_seconds = 1.5;
  return config;
}

WorkerMessage Keepalive() {
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  ping.ping_unix_us = 0;
  return ping;
}

TEST_CASE("A rank silent for half the timeout before its stream closed has timed out",
          "[controller][fault]") {
  Job job(FaultOptions(3), MakeLogger(0, "controller", spdlog::level::off));
  job.JoinAll();
  job.clock.Advance(1500ms);
  job.controller.OnStreamClosed(2, Unavailable("control stream of rank 2 closed"));
  CHECK(job.controller.abort_reason() ==
        "rank 2 lost: nothing heard from it for 1.5 s; its control stream timed out after 2 s "
        "(KOLO_TIMEOUT_SECONDS): process stopped, or its host or network gone");
}

TEST_CASE("A rank whose stream closes soon after its last keepalive is dead, not timed out",
          "[controller][fault]") {
  Job job(FaultOptions(3), MakeLogger(0, "controller", spdlog::level::off));
  job.JoinAll();
  job.clock.Advance(1500ms);
  job.controller.OnMessage(2, Keepalive());
  job.clock.Advance(100ms);
  job.controller.OnStreamClosed(2, Unavailable("control stream of rank 2 closed"));
  CHECK(job.controller.abort_reason() == "rank 2 lost: control stream of rank 2 closed");
}

TEST_CASE("The rendezvous expires at the start timeout, naming the ranks that never arrived",
          "[controller][fault]") {
  Job job(FaultOptions(4), MakeLogger(0, "controller", spdlog::level::off));
  const auto start = job.clock.Now();
  REQUIRE(job.controller.OnHello(MakeHello(0, 4)).ok());
  REQUIRE(job.controller.OnHello(MakeHello(2, 4)).ok());
  CHECK(job.controller.CheckStart() == start + 1500ms);
  job.clock.Advance(1499ms);
  CHECK(job.controller.CheckStart() == start + 1500ms);
  CHECK_FALSE(job.controller.aborted());
  job.clock.Advance(1ms);
  CHECK_FALSE(job.controller.CheckStart().has_value());
  const std::string reason =
      "ranks 1 and 3 never connected to the controller within 1.5 s (KOLO_START_TIMEOUT_SECONDS; "
      "is every rank started, with the same KOLO_CONTROLLER?)";
  CHECK(job.controller.abort_reason() == reason);
  CHECK(job.outbox.Log(0) == Lines{"abort: " + reason});
  CHECK(job.outbox.Log(2) == Lines{"abort: " + reason});
  // A late rank is refused with the reason.
  CHECK(job.controller.OnHello(MakeHello(1, 4)).code() == StatusCode::kAborted);
}

TEST_CASE("A complete rendezvous has no start deadline", "[controller][fault]") {
  Job job(FaultOptions(2), MakeLogger(0, "controller", spdlog::level::off));
  job.JoinAll();
  job.clock.Advance(10s);
  CHECK_FALSE(job.controller.CheckStart().has_value());
  CHECK_FALSE(job.controller.aborted());
}

}  // namespace
}  // namespace kolo::controller::testing
