// RoundTrace (core/timeline/round_trace.h): rank 0's drawing of the rounds' negotiations. A peer
// ahead of this rank may send its message for the next round, reporting a tensor's next step,
// before this rank applied the decision that closes the step before: that readiness must open
// the next span, not vanish into the one being closed.
#include "core/timeline/round_trace.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

using namespace kolo;

namespace {

class RecordingSink final : public TraceSink {
 public:
  bool enabled() const override { return true; }
  void Record(TraceEvent event) override { events.push_back(std::move(event)); }
  // "B", "i2", "E" ... in order.
  std::string Phases() const {
    std::string out;
    for (const TraceEvent& e : events) {
      out += (out.empty() ? "" : " ") + std::string(1, e.phase) + (e.phase == 'i' ? e.name : "");
    }
    return out;
  }
  std::vector<TraceEvent> events;
};

}  // namespace

TEST_CASE("A peer's readiness for the next round opens the next span once this round closes",
          "[core][timeline][fastpath]") {
  RecordingSink sink;
  RoundTrace trace(&sink, 3);
  const Clock::TimePoint t;
  // Round 1: ranks 1 and 2 report x (id 7); this rank has not applied round 1's decision when
  // both their messages for round 2 arrive, reporting x's next step.
  trace.Ready(1, 7, "x", OpType::kAllreduce, 1, t);
  trace.Ready(2, 7, "x", OpType::kAllreduce, 1, t);
  trace.Ready(2, 7, "x", OpType::kAllreduce, 2, t);
  trace.Ready(1, 7, "x", OpType::kAllreduce, 2, t);
  trace.Closed(7, "x", true, t);
  trace.Decided(1, t);
  trace.Closed(7, "x", true, t);  // round 2 decides the next step
  trace.Decided(2, t);
  CHECK(sink.Phases() == "B i1 i2 E B i2 i1 E");
  // Within one round a peer repeats what still waits: one tick per rank and span.
  trace.Ready(1, 7, "x", OpType::kAllreduce, 3, t);
  trace.Ready(1, 7, "x", OpType::kAllreduce, 3, t);
  trace.Ready(0, 7, "x", OpType::kAllreduce, 0, t);  // this rank's own, at its offer
  trace.Closed(7, "x", true, t);
  trace.Decided(3, t);
  CHECK(sink.Phases() == "B i1 i2 E B i2 i1 E B i1 i0 E");
  CHECK(sink.events.back().args_json == "{\"last_rank\":0}");
}
