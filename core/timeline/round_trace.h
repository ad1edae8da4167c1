// RoundTrace: the fast path's negotiations on the timeline (docs/TIMELINE.md). Cached ops
// agreed on in rounds never reach the controller, so rank 0's background loop draws them
// where the controller draws its own: on the controller process (pid kControllerTracePid), one
// track per tensor, a NEGOTIATE_<OP> span (NEGOTIATE_ALLREDUCE, ...) from the first rank
// seen ready to the round that runs it, with an instant per rank as its readiness arrives and
// {"last_rank":R} naming the rank that was ready last (-1 when it went to the controller
// instead, whose own span then follows).
//
// Threading: background thread only; `sink` is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/trace_sink.h"
#include "kolo/types.h"

namespace kolo {

class RoundTrace {
 public:
  // `sink` may be null: nothing is recorded.
  RoundTrace(TraceSink* sink, int size) : sink_(sink), size_(size) {}

  // Whether a timeline records (Ready does nothing otherwise).
  bool on() const { return sink_ != nullptr && sink_->enabled(); }

  // Rank `rank` reported cache id `id` (tensor `name`, an `op`) ready in its message for round
  // `round` (0: this rank's own, now). A message for a round after the one whose decision comes
  // next is held back until then (Decided): a peer ahead may report the tensor's next step
  // before this rank closed the span of the step before.
  void Ready(int rank, uint32_t id, const std::string& name, OpType op, uint64_t round,
             Clock::TimePoint now);
  // A round decided: `id` runs, or goes to the controller (`ran` false).
  void Closed(uint32_t id, const std::string& name, bool ran, Clock::TimePoint now);
  // Round `round`'s decision was applied (after its Closed calls): what was held back for the
  // round after it is recorded now.
  void Decided(uint64_t round, Clock::TimePoint now);

 private:
  TraceSink* const sink_;
  const int size_;
  struct Open {
    std::vector<bool> seen;  // by rank
    int last_rank = -1;
    std::string span;  // NegotiateSpanName of its op
  };
  std::unordered_map<uint32_t, Open> open_;
  struct Held {
    int rank;
    uint32_t id;
    std::string name;
    OpType op;
    uint64_t round;
  };
  std::vector<Held> held_;  // in arrival order
  uint64_t decided_ = 0;    // the last round whose decision was applied
};

}  // namespace kolo
