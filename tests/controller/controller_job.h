// Job: a Controller for controller tests, on a ManualClock and wired to a RecordingOutbox, with
// builders for the worker messages fed to it. Header-only; used by tests/controller/*_test.cc.
// Single-threaded use (the test thread drives RunCycle and CheckStalls).
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "controller/controller.h"
#include "core/logging.h"
#include "tests/controller/recording_outbox.h"

namespace kolo::controller::testing {

inline Hello MakeHello(int rank, int size) {
  Hello hello;
  hello.rank = rank;
  hello.size = size;
  hello.host = "h" + std::to_string(rank);
  hello.data_address = "a" + std::to_string(rank);
  return hello;
}

inline WorkerMessage Requests(std::vector<Request> requests) {
  WorkerMessage m;
  m.kind = WorkerMessage::Kind::kRequests;
  m.requests = std::move(requests);
  return m;
}

inline WorkerMessage Notice(WorkerMessage::Kind kind, std::string reason = "") {
  WorkerMessage m;
  m.kind = kind;
  m.reason = std::move(reason);
  return m;
}

// The tests' usual configuration: a 1 ms cycle, 1 MiB fusion, 16 cache ids, the table's
// defaults else, except that the controller is driven by hand: no start timeout, and the
// timeout unknown (0).
inline Options TestOptions(int size, int64_t fusion_threshold_bytes = 1 << 20,
                           double cycle_time_ms = 1.0, int cache_capacity = 16) {
  Options options;
  options.size = size;
  options.fusion_threshold_bytes = fusion_threshold_bytes;
  options.cycle_time_ms = cycle_time_ms;
  options.cache_capacity = cache_capacity;
  options.start_timeout_seconds = 0;
  options.timeout_seconds = 0;
  return options;
}

// A controller for `size` ranks on a ManualClock with a 1 ms cycle, wired to a recorder.
struct Job {
  using Lines = std::vector<std::string>;

  explicit Job(int size, spdlog::level::level_enum level = spdlog::level::off)
      : Job(TestOptions(size), MakeLogger(0, "controller", level)) {}
  // `trace`, if any, must outlive the job.
  Job(const Options& job_options, Logger logger, TraceSink* trace = nullptr)
      : options(job_options),
        size(options.size),
        outbox(options.size),
        controller(options, trace, &clock, std::move(logger)) {
    controller.Attach(&outbox);
  }

  void JoinAll() {
    for (int rank = 0; rank < size; ++rank) REQUIRE(controller.OnHello(MakeHello(rank, size)).ok());
    outbox.Clear();
  }
  void AllSend(const std::vector<Request>& requests) {
    for (int rank = 0; rank < size; ++rank) controller.OnMessage(rank, Requests(requests));
  }
  // Closes the fusion window and runs the sequencer step.
  void Cycle() {
    clock.Advance(std::chrono::milliseconds(1));
    CHECK_FALSE(controller.RunCycle().has_value());
  }
  // Every rank received the same messages; returns rank 0's.
  Lines Same() {
    Lines first = outbox.Log(0);
    for (int rank = 1; rank < size; ++rank) CHECK(outbox.Log(rank) == first);
    return first;
  }

  const Options options;
  const int size;
  ManualClock clock;
  RecordingOutbox outbox;
  Controller controller;
};

}  // namespace kolo::controller::testing
