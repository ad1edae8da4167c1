// Negotiation timeline: turns the controller's negotiation steps and planned batches into trace
// events of the controller process (docs/TIMELINE.md, pid kControllerTracePid; one track per
// tensor name). Called by the Controller under its lock; TraceSink::Record never blocks.
// Stateless functions; safe from any thread as far as `sink` is.
#pragma once

#include <string>
#include <vector>

#include "controller/readiness_table.h"
#include "core/clock.h"
#include "core/messages.h"
#include "core/trace_sink.h"

namespace kolo::controller {

// Records `events` at `now`, in order: kBegin -> `B` NEGOTIATE_<OP>; kAnnounce -> instant
// named by the rank ("2", scope 't'); kEnd -> `E` NEGOTIATE_<OP> with {"last_rank":R}.
// `sink` must be non-null; callers check sink->enabled() first.
void RecordNegotiation(TraceSink* sink, const std::vector<NegotiationEvent>& events,
                       Clock::TimePoint now);

// Records the global instant "CYCLE" (track "", scope 'g') with
// {"responses":n,"tensors":m} for a planned batch. `sink` must be non-null.
void RecordCycle(TraceSink* sink, const std::vector<Response>& responses, Clock::TimePoint now);

}  // namespace kolo::controller
