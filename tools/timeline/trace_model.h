// TraceModel: the spans of a TraceSet that summary and plot reason about: the controller's
// negotiations (with the ranks' announcement ticks), the ranks' op spans and their phases.
// Built once by BuildTraceModel (kolo-timeline summary/plot, tests); plain data afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/timeline/trace_set.h"

namespace kolo::timeline {

// The execution phases of an op span (docs/TIMELINE.md). kCopyIn is MEMCPY_IN_FUSION_BUFFER or
// COPY_INPUT, kCopyOut MEMCPY_OUT_FUSION_BUFFER or SCALE_OUTPUT; kTransfer is <ALGO>_<OP> of
// the enclosing op span (RING_ALLREDUCE, NCCL_ALLREDUCE, RING_ALLGATHER, ...); kOther is any
// other complete event on a rank's track, kept apart so that it is not counted as transfer.
enum class Phase { kQueue = 0, kCopyIn, kTransfer, kCopyOut, kCallback, kOther };
constexpr int kNumPhases = 6;
// "queue", "copy_in", "transfer", "copy_out", "callback", "other".
const char* PhaseName(Phase phase);
// The phase of complete event `event_name` inside an op span named `op_name` ("ALLREDUCE";
// "" when the span is unknown, e.g. its B event was dropped: then any name ending in a
// collective's name counts as transfer).
Phase ClassifyPhase(const std::string& event_name, const std::string& op_name);

struct Interval {
  double begin_us = 0;
  double end_us = 0;
};

// The union of `intervals`, sorted, with overlapping or touching ones joined.
std::vector<Interval> UnionOf(std::vector<Interval> intervals);
double TotalLength(const std::vector<Interval>& intervals);

// A NEGOTIATE_<OP> span of the controller that ended.
struct Negotiation {
  std::string tensor;  // the track's name
  std::string op;      // "ALLREDUCE", ...
  double begin_us = 0;
  double end_us = 0;
  int last_rank = -1;  // the E event's last_rank, else the last tick's; -1 if neither
  double wait_us() const { return end_us - begin_us; }
};

// An op span (<OP> B..E) of one rank that ended.
struct OpSpan {
  int rank = 0;
  std::string tensor;
  std::string op;
  double begin_us = 0;
  double end_us = 0;
  int64_t bytes = 0;       // args.bytes of the B event (0 if absent)
  int64_t group = -1;      // fused_group (the response's seq), else seq, else -1
  int64_t group_size = 0;  // tensors in the response; 0 if absent
  bool ok = true;          // args.status of the E event is "OK" (or absent)
};

// One complete phase event on a rank's track.
struct PhaseSpan {
  int rank = 0;
  Phase phase = Phase::kQueue;
  double begin_us = 0;
  double end_us = 0;
};

struct TraceModel {
  std::vector<RankInfo> ranks;
  std::vector<Negotiation> negotiations;  // in the order they ended
  std::vector<OpSpan> ops;                // in the order they ended
  std::vector<PhaseSpan> phases;          // file order; fused phases repeat per member track
  double begin_us = 0;                    // extent of all timed events
  double end_us = 0;
  std::vector<std::string> warnings;  // the set's, plus spans that never ended
};

TraceModel BuildTraceModel(const TraceSet& set);

}  // namespace kolo::timeline
