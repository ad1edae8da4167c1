#include "controller/negotiation_trace.h"

#include <utility>

namespace kolo::controller {

void RecordNegotiation(TraceSink* sink, const std::vector<NegotiationEvent>& events,
                       Clock::TimePoint now) {
  for (const NegotiationEvent& step : events) {
    switch (step.kind) {
      case NegotiationEvent::Kind::kBegin:
        sink->Record(ControllerTraceEvent('B', step.name, NegotiateSpanName(step.op), now));
        break;
      case NegotiationEvent::Kind::kAnnounce:
        sink->Record(ControllerTraceEvent('i', step.name, std::to_string(step.rank), now));
        break;
      case NegotiationEvent::Kind::kEnd: {
        TraceEvent end = ControllerTraceEvent('E', step.name, NegotiateSpanName(step.op), now);
        end.args_json = "{\"last_rank\":" + std::to_string(step.rank) + "}";
        sink->Record(std::move(end));
        break;
      }
    }
  }
}

void RecordCycle(TraceSink* sink, const std::vector<Response>& responses, Clock::TimePoint now) {
  size_t tensors = 0;
  for (const Response& response : responses) tensors += response.names.size();
  TraceEvent cycle = ControllerTraceEvent('i', "", "CYCLE", now);
  cycle.scope = 'g';
  cycle.args_json = "{\"responses\":" + std::to_string(responses.size()) +
                    ",\"tensors\":" + std::to_string(tensors) + "}";
  sink->Record(std::move(cycle));
}

}  // namespace kolo::controller
