// Executor: runs the data-plane part of one decided Response (DESIGN.md §3). ops/ implements it
// (CPU ring collectives); the background loop calls it in response sequence order.
//
// Threading: background thread only. Execute blocks until the data movement has finished.
#pragma once

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
};

}  // namespace kolo
