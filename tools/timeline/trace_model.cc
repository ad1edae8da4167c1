// Matching B/E pairs per track and collecting phases and ticks; see trace_model.h.
#include "tools/timeline/trace_model.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

namespace kolo::timeline {
namespace {

constexpr std::string_view kNegotiatePrefix = "NEGOTIATE_";
// Op span names whose <ALGO>_<OP> phases are transfers, for phases outside a known span.
constexpr const char* kCollectiveNames[] = {"ALLREDUCE", "ALLGATHER",     "BROADCAST",
                                            "ALLTOALL",  "REDUCESCATTER", "REDUCE_SCATTER",
                                            "BARRIER"};

using TrackKey = std::pair<int64_t, int64_t>;  // (pid, tid)

// A B event waiting for its E, with what has been seen inside it so far.
struct OpenSpan {
  enum Kind { kNegotiation, kOp, kOther } kind = kOther;
  const Event* begin = nullptr;
  double last_tick_us = -std::numeric_limits<double>::infinity();
  int last_tick_rank = -1;
};

bool ParseRankName(const std::string& name, int* rank) {
  if (name.empty() || name.size() > 9) return false;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  *rank = std::atoi(name.c_str());
  return true;
}

class ModelBuilder {
 public:
  explicit ModelBuilder(const TraceSet& set) { model_.ranks = set.ranks; }

  void CollectTrackNames(const std::vector<Event>& events);
  void Visit(const Event& event);
  TraceModel Finish(const std::vector<std::string>& set_warnings);

 private:
  std::string TrackName(const Event& event) const;
  // The name of the innermost open op span on the event's track, or "".
  std::string EnclosingOpName(const Event& event) const;
  void Begin(const Event& event);
  void End(const Event& event);
  void Instant(const Event& event);
  void CompleteNegotiation(const OpenSpan& open, const Event& end);
  void CompleteOp(const OpenSpan& open, const Event& end);
  void Extend(double ts_us);

  TraceModel model_;
  std::map<TrackKey, std::string> track_names_;
  std::map<TrackKey, std::vector<OpenSpan>> open_;
  int64_t unmatched_ends_ = 0;
  bool any_time_ = false;
};

void ModelBuilder::CollectTrackNames(const std::vector<Event>& events) {
  for (const Event& event : events) {
    if (event.phase == 'M' && event.name == "thread_name" && event.has_tid) {
      track_names_[{event.pid, event.tid}] = GetString(event.args, "name");
    }
  }
}

std::string ModelBuilder::TrackName(const Event& event) const {
  auto it = track_names_.find({event.pid, event.tid});
  if (it != track_names_.end() && !it->second.empty()) return it->second;
  return "track " + std::to_string(event.tid);
}

std::string ModelBuilder::EnclosingOpName(const Event& event) const {
  auto it = open_.find({event.pid, event.tid});
  if (it == open_.end() || it->second.empty() || it->second.back().kind != OpenSpan::kOp) {
    return "";
  }
  return it->second.back().begin->name;
}

void ModelBuilder::Extend(double ts_us) {
  if (!any_time_) {
    model_.begin_us = model_.end_us = ts_us;
    any_time_ = true;
  }
  model_.begin_us = std::min(model_.begin_us, ts_us);
  model_.end_us = std::max(model_.end_us, ts_us);
}

void ModelBuilder::Visit(const Event& event) {
  if (event.phase == 'M') return;
  Extend(event.ts_us);
  switch (event.phase) {
    case 'B':
      Begin(event);
      return;
    case 'E':
      End(event);
      return;
    case 'i':
      Instant(event);
      return;
    case 'X':
      Extend(event.ts_us + event.dur_us);
      if (event.pid != kControllerPid) {
        model_.phases.push_back({static_cast<int>(event.pid),
                                 ClassifyPhase(event.name, EnclosingOpName(event)), event.ts_us,
                                 event.ts_us + event.dur_us});
      }
      return;
    default:
      return;  // counters, flows, ...: not part of the kolo format
  }
}

void ModelBuilder::Begin(const Event& event) {
  OpenSpan open;
  open.begin = &event;
  const bool controller = event.pid == kControllerPid;
  if (controller && event.name.compare(0, kNegotiatePrefix.size(), kNegotiatePrefix) == 0) {
    open.kind = OpenSpan::kNegotiation;
  } else if (!controller) {
    open.kind = OpenSpan::kOp;
  }
  open_[{event.pid, event.tid}].push_back(open);
}

void ModelBuilder::Instant(const Event& event) {
  if (event.pid != kControllerPid || event.scope != 't') return;  // CYCLE marks are global
  auto it = open_.find({event.pid, event.tid});
  if (it == open_.end() || it->second.empty()) return;
  OpenSpan& open = it->second.back();
  int rank = -1;
  // ">=": of ticks with equal times, the one written last was recorded last.
  if (open.kind == OpenSpan::kNegotiation && ParseRankName(event.name, &rank) &&
      event.ts_us >= open.last_tick_us) {
    open.last_tick_us = event.ts_us;
    open.last_tick_rank = rank;
  }
}

void ModelBuilder::End(const Event& event) {
  auto it = open_.find({event.pid, event.tid});
  if (it == open_.end() || it->second.empty()) {
    ++unmatched_ends_;
    return;
  }
  const OpenSpan open = it->second.back();
  it->second.pop_back();
  if (open.kind == OpenSpan::kNegotiation) CompleteNegotiation(open, event);
  if (open.kind == OpenSpan::kOp) CompleteOp(open, event);
}

void ModelBuilder::CompleteNegotiation(const OpenSpan& open, const Event& end) {
  Negotiation negotiation;
  negotiation.tensor = TrackName(*open.begin);
  negotiation.op = open.begin->name.substr(kNegotiatePrefix.size());
  negotiation.begin_us = open.begin->ts_us;
  negotiation.end_us = end.ts_us;
  int64_t last_rank = -1;
  negotiation.last_rank =
      GetInt(end.args, "last_rank", &last_rank) ? static_cast<int>(last_rank) : open.last_tick_rank;
  model_.negotiations.push_back(std::move(negotiation));
}

void ModelBuilder::CompleteOp(const OpenSpan& open, const Event& end) {
  OpSpan op;
  op.rank = static_cast<int>(open.begin->pid);
  // A name enqueued again before its previous span ended is drawn on "name #2" (docs); the
  // B event's args carry the tensor's own name.
  op.tensor = GetString(open.begin->args, "tensor");
  if (op.tensor.empty()) op.tensor = TrackName(*open.begin);
  op.op = open.begin->name;
  op.begin_us = open.begin->ts_us;
  op.end_us = end.ts_us;
  GetInt(open.begin->args, "bytes", &op.bytes);
  if (!GetInt(end.args, "fused_group", &op.group)) GetInt(end.args, "seq", &op.group);
  GetInt(end.args, "group_size", &op.group_size);
  const std::string status = GetString(end.args, "status");
  op.ok = status.empty() || status == "OK";
  model_.ops.push_back(std::move(op));
}

TraceModel ModelBuilder::Finish(const std::vector<std::string>& set_warnings) {
  model_.warnings = set_warnings;
  int64_t unfinished = 0;
  for (const auto& [track, spans] : open_) unfinished += static_cast<int64_t>(spans.size());
  if (unfinished > 0) {
    model_.warnings.push_back(std::to_string(unfinished) +
                              " spans never ended (the trace stops mid-operation); left out");
  }
  if (unmatched_ends_ > 0) {
    model_.warnings.push_back(std::to_string(unmatched_ends_) +
                              " end events without a begin (dropped events?); ignored");
  }
  return std::move(model_);
}

}  // namespace

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kQueue:
      return "queue";
    case Phase::kCopyIn:
      return "copy_in";
    case Phase::kTransfer:
      return "transfer";
    case Phase::kCopyOut:
      return "copy_out";
    case Phase::kCallback:
      return "callback";
    case Phase::kOther:
      return "other";
  }
  return "unknown";
}

Phase ClassifyPhase(const std::string& event_name, const std::string& op_name) {
  if (event_name == "QUEUE") return Phase::kQueue;
  // A fused response copies through the fusion buffer; a single tensor copies its input into
  // its output and scales the result there (docs/TIMELINE.md).
  if (event_name == "MEMCPY_IN_FUSION_BUFFER" || event_name == "COPY_INPUT") {
    return Phase::kCopyIn;
  }
  if (event_name == "MEMCPY_OUT_FUSION_BUFFER" || event_name == "SCALE_OUTPUT") {
    return Phase::kCopyOut;
  }
  if (event_name == "CALLBACK") return Phase::kCallback;
  auto ends_with = [&](const std::string& op) {
    const std::string suffix = "_" + op;
    return event_name.size() > suffix.size() &&
           event_name.compare(event_name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (!op_name.empty()) return ends_with(op_name) ? Phase::kTransfer : Phase::kOther;
  for (const char* op : kCollectiveNames) {
    if (ends_with(op)) return Phase::kTransfer;
  }
  return Phase::kOther;
}

std::vector<Interval> UnionOf(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.begin_us < b.begin_us; });
  std::vector<Interval> joined;
  for (const Interval& interval : intervals) {
    if (!joined.empty() && interval.begin_us <= joined.back().end_us) {
      joined.back().end_us = std::max(joined.back().end_us, interval.end_us);
    } else {
      joined.push_back(interval);
    }
  }
  return joined;
}

double TotalLength(const std::vector<Interval>& intervals) {
  double total = 0;
  for (const Interval& interval : intervals) total += interval.end_us - interval.begin_us;
  return total;
}

TraceModel BuildTraceModel(const TraceSet& set) {
  ModelBuilder builder(set);
  builder.CollectTrackNames(set.events);
  for (const Event& event : set.events) builder.Visit(event);
  return builder.Finish(set.warnings);
}

}  // namespace kolo::timeline
