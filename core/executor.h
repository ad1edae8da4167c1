// Executor: runs the data-plane part of one decided Response (DESIGN.md §3). ops/ implements it
// (CPU ring collectives); the background loop calls it in response sequence order.
//
// Threading: one thread at a time, the background thread (or a caller the loop lends it to,
// BackgroundLoop::RunWithDataPlane), except where a method says otherwise. Execute blocks until
// the data movement has finished; Launch (device work) returns at once and completes later on
// the executor's completion thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/clock.h"
#include "core/messages.h"
#include "core/tensor_entry.h"
#include "kolo/status.h"

namespace kolo {

// Told about each phase of an Execute call once it has finished, for the timeline
// (docs/TIMELINE.md names the phases). Called on the background thread.
class PhaseObserver {
 public:
  virtual ~PhaseObserver() = default;
  virtual void OnPhase(const char* name, Clock::TimePoint start, Clock::TimePoint end) = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Executes `response` (never an error response) over `entries`, this rank's entries for
  // response.names in the same order. On OK every entry's output holds its result. A failure
  // is job-fatal (the data plane is in an unknown state); its message names the op, the
  // tensors and the peer rank involved. `observer` (may be null) hears each finished phase.
  virtual Status Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                         PhaseObserver* observer) = 0;

  // A fast-path allreduce not decided yet (`op` its signature, `entry` this rank's): copies its
  // input where the data plane will read it when the op runs as the plane's next exchange, and
  // returns a number that every rank's staging of that exchange gets alike, for the round
  // message (docs/FAST-PATH.md, "Staged inputs"); nullopt when it stages nothing. Execute
  // skips that copy and a sync when Response::staged holds that number. The entry's input
  // must stay unchanged until the op completes (the API's contract).
  virtual std::optional<uint64_t> StageInput(const OpSignature& /*op*/,
                                             const TensorEntry& /*entry*/) {
    return std::nullopt;
  }

  // --- Asynchronous execution (device collectives complete long after they are enqueued). ---
  using Done = std::function<void(const Status&)>;
  // True if `response` runs through Launch instead of Execute.
  virtual bool RunsAsync(const Response& /*response*/) const { return false; }
  // Enqueues `response` over `entries` (as for Execute) and returns without waiting. A non-OK
  // return is job-fatal and `done` never runs. After OK, `done` runs exactly once, on the
  // executor's own completion thread, under no lock: with OK once every output holds its
  // result, or with the error that made the op fail (job-fatal). `entries`, `observer` and the
  // memory they point to stay valid until then; `observer` may be called on that thread.
  virtual Status Launch(const Response& /*response*/, const std::vector<TensorEntry*>& /*entries*/,
                        PhaseObserver* /*observer*/, Done /*done*/) {
    return Internal("this executor runs nothing asynchronously");
  }
  // The job aborted with `why`: every launched op that has not completed fails with it soon
  // (its `done` runs with `why`), without waiting for peers. Any thread; idempotent.
  virtual void Interrupt(const Status& /*why*/) {}
};

}  // namespace kolo
