// Text tables and JSON for a Summary; see summary_format.h.
#include "tools/timeline/summary_format.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace kolo::timeline {
namespace {

// Columns padded to their widest cell, aligned per `align` ('l' or 'r' for each column).
class TextTable {
 public:
  explicit TextTable(std::string align) : align_(std::move(align)) {}
  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::string Render() const {
    std::vector<size_t> widths(align_.size(), 0);
    for (const auto& row : rows_) {
      for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
        widths[i] = std::max(widths[i], row[i].size());
      }
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line;
      for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
        const std::string pad(widths[i] - row[i].size(), ' ');
        line += "  " + (align_[i] == 'l' ? row[i] + pad : pad + row[i]);
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  std::string align_;
  std::vector<std::vector<std::string>> rows_;
};

std::string Printf(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

std::string Ms(double us) {
  return Printf("%.3f", us / 1000.0);
}
std::string Percent(double share) {
  return Printf("%.1f%%", share * 100.0);
}

std::string Bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + " B";
  return Printf("%.2f", value) + " " + units[unit];
}

std::string Rate(double bytes_per_second) {
  const char* units[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"};
  double value = bytes_per_second;
  int unit = 0;
  while (value >= 1000.0 && unit < 4) {
    value /= 1000.0;
    ++unit;
  }
  return Printf("%.2f", value) + " " + units[unit];
}

std::string RankLabel(int rank) {
  return rank < 0 ? "all" : std::to_string(rank);
}

// "rank 1 (3), rank 0 (1)": most often first, at most three.
std::string LastRanks(const WaitStats& wait) {
  std::vector<std::pair<int, int64_t>> counts(wait.last_rank_counts.begin(),
                                              wait.last_rank_counts.end());
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (size_t i = 0; i < counts.size() && i < 3; ++i) {
    if (i > 0) text += ", ";
    text +=
        "rank " + std::to_string(counts[i].first) + " (" + std::to_string(counts[i].second) + ")";
  }
  if (counts.size() > 3) text += ", +" + std::to_string(counts.size() - 3) + " more";
  return text.empty() ? "-" : text;
}

std::string NegotiationTable(const Summary& summary) {
  TextTable table("llrrrl");
  table.AddRow({"tensor", "op", "count", "mean", "max", "last to announce (times)"});
  auto add = [&](const std::string& tensor, const std::string& op, const WaitStats& wait) {
    table.AddRow({tensor, op, std::to_string(wait.count), Ms(wait.mean_us()), Ms(wait.max_us),
                  LastRanks(wait)});
  };
  for (const TensorWait& tensor : summary.tensors) add(tensor.tensor, tensor.op, tensor.wait);
  add("all", "", summary.all_negotiations);
  return "Negotiation wait per tensor (ms, NEGOTIATE_* begin to end)\n" + table.Render();
}

std::string StragglerTable(const Summary& summary) {
  TextTable table("rrrr");
  table.AddRow({"rank", "times last", "share", "wait caused (ms)"});
  const double count = static_cast<double>(summary.all_negotiations.count);
  for (const Straggler& straggler : summary.stragglers) {
    table.AddRow({RankLabel(straggler.rank), std::to_string(straggler.times_last),
                  Percent(count > 0 ? static_cast<double>(straggler.times_last) / count : 0),
                  Ms(straggler.wait_caused_us)});
  }
  return "Stragglers (last rank to announce; the negotiation's whole wait is charged to it)\n" +
         table.Render();
}

std::string PhaseTable(const Summary& summary) {
  TextTable table("rrrrrrrrr");
  table.AddRow({"rank", "queue", "copy in", "transfer", "copy out", "callback", "other", "copy %",
                "transfer %"});
  auto add = [&](const RankTotals& totals) {
    table.AddRow({RankLabel(totals.rank), Ms(totals.us(Phase::kQueue)),
                  Ms(totals.us(Phase::kCopyIn)), Ms(totals.us(Phase::kTransfer)),
                  Ms(totals.us(Phase::kCopyOut)), Ms(totals.us(Phase::kCallback)),
                  Ms(totals.us(Phase::kOther)), Percent(totals.copy_share()),
                  Percent(totals.transfer_share())});
  };
  for (const RankTotals& totals : summary.per_rank) add(totals);
  add(summary.all_ranks);
  return "Wall time per rank and phase (ms; spans that overlap count once; copies vs transfer)\n" +
         table.Render();
}

std::string BandwidthTable(const Summary& summary) {
  TextTable table("rrrrrr");
  table.AddRow({"rank", "ops", "failed", "bytes", "transfer (ms)", "bandwidth"});
  auto add = [&](const RankTotals& totals) {
    table.AddRow({RankLabel(totals.rank), std::to_string(totals.ops),
                  std::to_string(totals.failed_ops), Bytes(totals.bytes),
                  Ms(totals.us(Phase::kTransfer)), Rate(totals.bytes_per_second())});
  };
  for (const RankTotals& totals : summary.per_rank) add(totals);
  add(summary.all_ranks);
  return "Bytes moved and bandwidth (tensor bytes of OK ops / transfer time)\n" + table.Render();
}

std::string FusionTable(const FusionStats& fusion) {
  TextTable table("rr");
  table.AddRow({"tensors", "responses"});
  for (const auto& [size, groups] : fusion.groups_by_size) {
    table.AddRow({std::to_string(size), std::to_string(groups)});
  }
  const double mean = fusion.groups > 0
                          ? static_cast<double>(fusion.tensors) / static_cast<double>(fusion.groups)
                          : 0;
  return "Fusion (tensors per response)\n" + table.Render() + "  " + std::to_string(fusion.groups) +
         " responses, " + std::to_string(fusion.tensors) + " tensors, " + Printf("%.2f", mean) +
         " tensors per response\n";
}

std::string OverlapTable(const Summary& summary) {
  TextTable table("rrrrr");
  table.AddRow(
      {"rank", "steps", "movement (ms/step)", "before last enqueue", "tail after it (ms/step)"});
  for (const OverlapStats& stats : summary.overlap) {
    table.AddRow({RankLabel(stats.rank), std::to_string(stats.steps),
                  Ms(stats.movement_per_step_us()), Percent(stats.overlapped_share()),
                  Ms(stats.tail_per_step_us())});
  }
  return "Overlap per step (steps: bursts of ops between idle gaps; copies and transfer that ran\n"
         "before the rank's last enqueue of the step overlapped the work producing its ops)\n" +
         table.Render();
}

JsonValue OverlapJson(const OverlapStats& stats) {
  return JsonValue::Object{{"rank", stats.rank},
                           {"steps", stats.steps},
                           {"movement_us", stats.movement_us},
                           {"overlapped_us", stats.overlapped_us},
                           {"overlapped_share", stats.overlapped_share()},
                           {"tail_us", stats.tail_us},
                           {"tail_per_step_us", stats.tail_per_step_us()}};
}

JsonValue WaitJson(const WaitStats& wait) {
  JsonValue last = JsonValue::EmptyObject();
  for (const auto& [rank, count] : wait.last_rank_counts) last.Set(std::to_string(rank), count);
  return JsonValue::Object{{"count", wait.count},
                           {"total_wait_us", wait.total_us},
                           {"mean_wait_us", wait.mean_us()},
                           {"max_wait_us", wait.max_us},
                           {"last_rank_counts", last}};
}

JsonValue TotalsJson(const RankTotals& totals) {
  JsonValue row = JsonValue::EmptyObject();
  if (totals.rank >= 0) row.Set("rank", totals.rank);
  for (int phase = 0; phase < kNumPhases; ++phase) {
    row.Set(std::string(PhaseName(static_cast<Phase>(phase))) + "_us", totals.phase_us[phase]);
  }
  row.Set("copy_share", totals.copy_share());
  row.Set("transfer_share", totals.transfer_share());
  row.Set("ops", totals.ops);
  row.Set("failed_ops", totals.failed_ops);
  row.Set("bytes", totals.bytes);
  row.Set("bytes_per_second", totals.bytes_per_second());
  return row;
}

}  // namespace

std::string FormatSummaryText(const Summary& summary) {
  std::string ranks;
  for (const RankInfo& info : summary.ranks)
    ranks += (ranks.empty() ? "" : ",") + std::to_string(info.rank);
  const int size = summary.ranks.empty() ? 0 : summary.ranks.front().size;
  std::string text = "kolo timeline: ranks " + ranks + " of " + std::to_string(size) + ", " +
                     Ms(summary.end_us - summary.begin_us) +
                     " ms traced (t = " + Ms(summary.begin_us) + " .. " + Ms(summary.end_us) +
                     " ms)\n\n";
  text += NegotiationTable(summary) + "\n";
  text += StragglerTable(summary) + "\n";
  text += PhaseTable(summary) + "\n";
  text += BandwidthTable(summary) + "\n";
  text += FusionTable(summary.fusion);
  if (!summary.overlap.empty()) text += "\n" + OverlapTable(summary);
  return text;
}

JsonValue SummaryToJson(const Summary& summary) {
  JsonValue ranks = JsonValue::EmptyArray();
  for (const RankInfo& info : summary.ranks) ranks.Append(info.rank);
  JsonValue tensors = JsonValue::EmptyArray();
  for (const TensorWait& tensor : summary.tensors) {
    JsonValue row = WaitJson(tensor.wait);
    row.as_object().insert(row.as_object().begin(), {{"tensor", tensor.tensor}, {"op", tensor.op}});
    tensors.Append(std::move(row));
  }
  JsonValue stragglers = JsonValue::EmptyArray();
  for (const Straggler& straggler : summary.stragglers) {
    stragglers.Append(JsonValue::Object{{"rank", straggler.rank},
                                        {"times_last", straggler.times_last},
                                        {"wait_caused_us", straggler.wait_caused_us}});
  }
  JsonValue per_rank = JsonValue::EmptyArray();
  for (const RankTotals& totals : summary.per_rank) per_rank.Append(TotalsJson(totals));
  JsonValue by_size = JsonValue::EmptyArray();
  for (const auto& [size, groups] : summary.fusion.groups_by_size) {
    by_size.Append(JsonValue::Object{{"tensors", size}, {"responses", groups}});
  }
  JsonValue overlap = JsonValue::EmptyArray();
  for (const OverlapStats& stats : summary.overlap) overlap.Append(OverlapJson(stats));
  JsonValue warnings = JsonValue::EmptyArray();
  for (const std::string& warning : summary.warnings) warnings.Append(warning);
  const int size = summary.ranks.empty() ? 0 : summary.ranks.front().size;
  return JsonValue::Object{
      {"ranks", ranks},
      {"size", size},
      {"begin_us", summary.begin_us},
      {"end_us", summary.end_us},
      {"negotiations",
       JsonValue::Object{{"tensors", tensors}, {"all", WaitJson(summary.all_negotiations)}}},
      {"stragglers", stragglers},
      {"phases", JsonValue::Object{{"per_rank", per_rank}, {"all", TotalsJson(summary.all_ranks)}}},
      {"fusion", JsonValue::Object{{"responses", summary.fusion.groups},
                                   {"tensors", summary.fusion.tensors},
                                   {"by_size", by_size}}},
      {"overlap", overlap},
      {"warnings", warnings}};
}

}  // namespace kolo::timeline
