// TraceSink: where kolo's components send timeline events (docs/TIMELINE.md). The runtime's
// TimelineHub implements it; the controller, the background loop and the executor record
// through it. Implementations are thread-safe and never block: a full queue drops and counts.
#pragma once

#include <string>

#include "core/clock.h"
#include "kolo/types.h"

namespace kolo {

// The controller's pseudo-process in the trace (negotiation tracks).
constexpr int kControllerTracePid = 1000000;

struct TraceEvent {
  char phase = 'X';   // 'B' begin, 'E' end, 'X' complete (start..end), 'i' instant
  int pid = 0;        // rank, or kControllerTracePid
  std::string track;  // tensor name; "" for global instants
  std::string name;   // "NEGOTIATE_ALLREDUCE", "RING_ALLREDUCE", "2" (a rank's tick), ...
  Clock::TimePoint start;
  Clock::TimePoint end;   // 'X' only
  std::string args_json;  // "" or the text of a JSON object, e.g. {"seq":3}
  char scope = 't';       // 'i' only: 't' this track, 'g' global
};

// An event of the controller's pseudo-process (its negotiation tracks) at `at`.
TraceEvent ControllerTraceEvent(char phase, std::string track, std::string name,
                                Clock::TimePoint at);

// The span of an op's negotiation on those tracks, whether the controller or the fast path's
// rounds agreed on it: "NEGOTIATE_ALLREDUCE", "NEGOTIATE_BROADCAST", ...
std::string NegotiateSpanName(OpType op);

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // Cheap (one atomic load); callers skip building events when false.
  virtual bool enabled() const = 0;
  // Queues `event`; drops it (and counts it) if the writer is behind or tracing is off.
  virtual void Record(TraceEvent event) = 0;
};

// JSON string escaping for names and args built by callers ("grad/\"w\"" -> grad/\"w\").
std::string JsonEscape(const std::string& text);

}  // namespace kolo
