// Summarize(): aggregation of a TraceModel; see summary.h.
#include "tools/timeline/summary.h"

#include <algorithm>
#include <utility>

#include "tools/timeline/plot_window.h"

namespace kolo::timeline {
namespace {

std::vector<TensorWait> WaitsPerTensor(const std::vector<Negotiation>& negotiations) {
  std::map<std::pair<std::string, std::string>, WaitStats> by_tensor;
  for (const Negotiation& negotiation : negotiations) {
    by_tensor[{negotiation.tensor, negotiation.op}].Add(negotiation);
  }
  std::vector<TensorWait> tensors;
  for (auto& [key, wait] : by_tensor) tensors.push_back({key.first, key.second, wait});
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorWait& a, const TensorWait& b) {
    return a.wait.total_us > b.wait.total_us;
  });
  return tensors;
}

std::vector<Straggler> Stragglers(const TraceModel& model) {
  std::map<int, Straggler> by_rank;
  for (const RankInfo& info : model.ranks) by_rank[info.rank].rank = info.rank;
  for (const Negotiation& negotiation : model.negotiations) {
    if (negotiation.last_rank < 0) continue;
    Straggler& straggler = by_rank[negotiation.last_rank];
    straggler.rank = negotiation.last_rank;
    ++straggler.times_last;
    straggler.wait_caused_us += negotiation.wait_us();
  }
  std::vector<Straggler> rows;
  for (const auto& [rank, straggler] : by_rank) rows.push_back(straggler);
  return rows;
}

// Phase wall times per rank: the union of each phase's spans.
std::map<int, RankTotals> PhaseTotals(const TraceModel& model) {
  std::map<std::pair<int, int>, std::vector<Interval>> spans;  // (rank, phase) -> spans
  for (const PhaseSpan& span : model.phases) {
    spans[{span.rank, static_cast<int>(span.phase)}].push_back({span.begin_us, span.end_us});
  }
  std::map<int, RankTotals> totals;
  for (const RankInfo& info : model.ranks) totals[info.rank].rank = info.rank;
  for (auto& [key, intervals] : spans) {
    RankTotals& rank = totals[key.first];
    rank.rank = key.first;
    rank.phase_us[key.second] = TotalLength(UnionOf(std::move(intervals)));
  }
  for (const OpSpan& op : model.ops) {
    RankTotals& rank = totals[op.rank];
    rank.rank = op.rank;
    ++rank.ops;
    if (op.ok) {
      rank.bytes += op.bytes;
    } else {
      ++rank.failed_ops;
    }
  }
  return totals;
}

FusionStats Fusion(const std::vector<OpSpan>& ops) {
  std::map<int64_t, int64_t> size_of_group;  // every rank reports each group; count it once
  for (const OpSpan& op : ops) {
    if (op.group < 0 || op.group_size <= 0) continue;
    int64_t& size = size_of_group[op.group];
    size = std::max(size, op.group_size);
  }
  FusionStats fusion;
  for (const auto& [group, size] : size_of_group) {
    ++fusion.groups_by_size[size];
    ++fusion.groups;
    fusion.tensors += size;
  }
  return fusion;
}

// Length of the parts of `sorted` (disjoint, in order, as UnionOf returns them) inside
// [begin, end].
double LengthWithin(const std::vector<Interval>& sorted, double begin, double end) {
  auto it =
      std::upper_bound(sorted.begin(), sorted.end(), begin,
                       [](double t, const Interval& interval) { return t < interval.end_us; });
  double length = 0;
  for (; it != sorted.end() && it->begin_us < end; ++it) {
    length += std::max(0.0, std::min(it->end_us, end) - std::max(it->begin_us, begin));
  }
  return length;
}

std::vector<OverlapStats> Overlap(const TraceModel& model) {
  const std::vector<Interval> steps = FindSteps(model);
  std::map<int, std::vector<Interval>> movement;  // rank -> copies and transfers, joined
  for (const PhaseSpan& span : model.phases) {
    if (span.phase == Phase::kCopyIn || span.phase == Phase::kTransfer ||
        span.phase == Phase::kCopyOut) {
      movement[span.rank].push_back({span.begin_us, span.end_us});
    }
  }
  for (auto& [rank, intervals] : movement) intervals = UnionOf(std::move(intervals));
  // Every op span lies inside one step (the steps are the union of the spans, split at gaps):
  // walk the spans by start time and the steps with them.
  std::vector<const OpSpan*> ops;
  for (const OpSpan& op : model.ops) ops.push_back(&op);
  std::sort(ops.begin(), ops.end(),
            [](const OpSpan* a, const OpSpan* b) { return a->begin_us < b->begin_us; });
  std::map<int, OverlapStats> by_rank;
  size_t next = 0;
  for (const Interval& step : steps) {
    std::map<int, std::pair<double, double>> last;  // rank -> (last enqueue, last end)
    for (; next < ops.size() && ops[next]->begin_us <= step.end_us; ++next) {
      const OpSpan& op = *ops[next];
      auto [it, first] = last.try_emplace(op.rank, op.begin_us, op.end_us);
      if (!first) {
        it->second.first = std::max(it->second.first, op.begin_us);
        it->second.second = std::max(it->second.second, op.end_us);
      }
    }
    for (const auto& [rank, times] : last) {
      OverlapStats& stats = by_rank[rank];
      stats.rank = rank;
      ++stats.steps;
      const std::vector<Interval>& moved = movement[rank];
      stats.movement_us += LengthWithin(moved, step.begin_us, step.end_us);
      stats.overlapped_us += LengthWithin(moved, step.begin_us, times.first);
      stats.tail_us += std::max(0.0, times.second - times.first);
    }
  }
  std::vector<OverlapStats> rows;
  for (const auto& [rank, stats] : by_rank) rows.push_back(stats);
  return rows;
}

}  // namespace

double OverlapStats::overlapped_share() const {
  return movement_us > 0 ? overlapped_us / movement_us : 0;
}

double OverlapStats::movement_per_step_us() const {
  return steps > 0 ? movement_us / static_cast<double>(steps) : 0;
}

double OverlapStats::tail_per_step_us() const {
  return steps > 0 ? tail_us / static_cast<double>(steps) : 0;
}

void WaitStats::Add(const Negotiation& negotiation) {
  ++count;
  total_us += negotiation.wait_us();
  max_us = std::max(max_us, negotiation.wait_us());
  if (negotiation.last_rank >= 0) ++last_rank_counts[negotiation.last_rank];
}

double RankTotals::copy_share() const {
  const double both = copies_us() + us(Phase::kTransfer);
  return both > 0 ? copies_us() / both : 0;
}

double RankTotals::transfer_share() const {
  const double both = copies_us() + us(Phase::kTransfer);
  return both > 0 ? us(Phase::kTransfer) / both : 0;
}

double RankTotals::bytes_per_second() const {
  const double transfer_us = us(Phase::kTransfer);
  return transfer_us > 0 ? static_cast<double>(bytes) / transfer_us * 1e6 : 0;
}

Summary Summarize(const TraceModel& model) {
  Summary summary;
  summary.ranks = model.ranks;
  summary.begin_us = model.begin_us;
  summary.end_us = model.end_us;
  summary.warnings = model.warnings;
  summary.tensors = WaitsPerTensor(model.negotiations);
  for (const Negotiation& negotiation : model.negotiations) {
    summary.all_negotiations.Add(negotiation);
  }
  summary.stragglers = Stragglers(model);
  for (const auto& [rank, totals] : PhaseTotals(model)) {
    summary.per_rank.push_back(totals);
    for (int phase = 0; phase < kNumPhases; ++phase) {
      summary.all_ranks.phase_us[phase] += totals.phase_us[phase];
    }
    summary.all_ranks.ops += totals.ops;
    summary.all_ranks.failed_ops += totals.failed_ops;
    summary.all_ranks.bytes += totals.bytes;
  }
  summary.fusion = Fusion(model.ops);
  summary.overlap = Overlap(model);
  return summary;
}

}  // namespace kolo::timeline
