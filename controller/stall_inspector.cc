#include "controller/stall_inspector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kolo::controller {
namespace {

using Duration = Clock::TimePoint::duration;

// Names listed per clause before "and N more"; clauses listed before "and N more ranks".
constexpr size_t kMaxNamesPerClause = 3;
constexpr size_t kMaxClauses = 8;

// Rounded up, so that any positive setting stays positive (a zero period would spin).
Duration ToDuration(double seconds) {
  return std::chrono::ceil<Duration>(std::chrono::duration<double>(seconds));
}

// "61 s", "0.3 s": a wait rounded to a tenth of a second.
std::string WaitText(Duration waited) {
  const double seconds = std::chrono::duration<double>(waited).count();
  return SecondsText(std::round(seconds * 10) / 10);
}

// Ranks that miss exactly the same stalled names.
struct Clause {
  std::vector<int> ranks;     // ascending
  std::vector<size_t> names;  // indexes into the stalled list, oldest first
};

// One clause per distinct set of missing names, in order of the clause's lowest rank.
std::vector<Clause> GroupByMissing(const std::vector<PendingName>& stalled) {
  std::map<int, std::vector<size_t>> by_rank;
  for (size_t i = 0; i < stalled.size(); ++i) {
    for (int rank : stalled[i].missing) by_rank[rank].push_back(i);
  }
  std::vector<Clause> clauses;
  std::map<std::vector<size_t>, size_t> clause_of;
  for (const auto& [rank, names] : by_rank) {
    auto [it, inserted] = clause_of.emplace(names, clauses.size());
    if (inserted) clauses.push_back(Clause{{}, names});
    clauses[it->second].ranks.push_back(rank);
  }
  return clauses;
}

// "rank 2", "ranks 2, 3", "ranks 1-4, 7": runs of three or more become ranges.
std::string RanksText(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t end = i + 1;  // one past the run that starts at i
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (i > 0) text += ", ";
    if (end - i >= 3) {
      text += std::to_string(ranks[i]) + "-" + std::to_string(ranks[end - 1]);
    } else {
      text += std::to_string(ranks[i]);
      if (end - i == 2) text += ", " + std::to_string(ranks[i + 1]);
    }
    i = end;
  }
  return text;
}

// "'a', 'b', 'c' and 2 more".
std::string NamesText(const std::vector<PendingName>& stalled, const std::vector<size_t>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < kMaxNamesPerClause; ++i) {
    text += (i == 0 ? "'" : ", '") + stalled[names[i]].name + "'";
  }
  if (names.size() > kMaxNamesPerClause) {
    text += " and " + std::to_string(names.size() - kMaxNamesPerClause) + " more";
  }
  return text;
}

// The clauses, each written by `describe`, joined by "; "; past kMaxClauses, a count of the
// remaining ranks.
std::string DescribeClauses(const std::vector<PendingName>& stalled,
                            const std::function<std::string(const Clause&)>& describe) {
  const std::vector<Clause> clauses = GroupByMissing(stalled);
  std::string text;
  for (size_t c = 0; c < clauses.size() && c < kMaxClauses; ++c) {
    text += (c == 0 ? "" : "; ") + describe(clauses[c]);
  }
  size_t more_ranks = 0;
  for (size_t c = kMaxClauses; c < clauses.size(); ++c) more_ranks += clauses[c].ranks.size();
  if (more_ranks > 0) text += "; and " + std::to_string(more_ranks) + " more ranks";
  return text;
}

}  // namespace

StallInspector::StallInspector(const Config& config)
    : config_(config),
      check_(ToDuration(config.check_seconds)),
      shutdown_(ToDuration(config.shutdown_seconds)) {}

namespace {

std::optional<Clock::TimePoint> Oldest(const std::vector<WatchedTable>& tables) {
  std::optional<Clock::TimePoint> oldest;
  for (const WatchedTable& watched : tables) {
    std::optional<Clock::TimePoint> first = watched.table->oldest_first_seen();
    if (first.has_value() && (!oldest.has_value() || *first < *oldest)) oldest = first;
  }
  return oldest;
}

std::vector<PendingName> Waiting(const std::vector<WatchedTable>& tables, Clock::TimePoint cutoff) {
  std::vector<PendingName> waiting;
  for (const WatchedTable& watched : tables) {
    for (PendingName& name : watched.table->WaitingSince(cutoff)) {
      if (watched.ranks != nullptr) {
        for (int& rank : name.missing) rank = (*watched.ranks)[static_cast<size_t>(rank)];
      }
      waiting.push_back(std::move(name));
    }
  }
  std::stable_sort(waiting.begin(), waiting.end(), [](const PendingName& a, const PendingName& b) {
    return a.first_seen < b.first_seen;
  });
  return waiting;
}

}  // namespace

StallInspector::Findings StallInspector::Inspect(const ReadinessTable& table,
                                                 Clock::TimePoint now) {
  return Inspect(std::vector<WatchedTable>{{&table, nullptr}}, now);
}

std::optional<Clock::TimePoint> StallInspector::NextCheck(const ReadinessTable& table) const {
  return NextCheck(std::vector<WatchedTable>{{&table, nullptr}});
}

StallInspector::Findings StallInspector::Inspect(const std::vector<WatchedTable>& tables,
                                                 Clock::TimePoint now) {
  Findings findings;
  const std::optional<Clock::TimePoint> oldest = Oldest(tables);
  if (!oldest.has_value()) return findings;
  const Duration waited = now - *oldest;
  if (shutdown_.count() > 0 && waited >= shutdown_) {
    findings.abort_reason = StallAbortReason(config_, Waiting(tables, now - shutdown_));
    return findings;
  }
  const bool warned_recently = last_warning_.has_value() && now - *last_warning_ < check_;
  if (check_.count() > 0 && waited >= check_ && !warned_recently) {
    findings.warning = StallWarning(config_, Waiting(tables, now - check_), now);
    last_warning_ = now;
  }
  return findings;
}

std::optional<Clock::TimePoint> StallInspector::NextCheck(
    const std::vector<WatchedTable>& tables) const {
  const std::optional<Clock::TimePoint> oldest = Oldest(tables);
  if (!oldest.has_value()) return std::nullopt;
  std::optional<Clock::TimePoint> next;
  if (check_.count() > 0) {
    next = *oldest + check_;
    if (last_warning_.has_value()) next = std::max(*next, *last_warning_ + check_);
  }
  if (shutdown_.count() > 0) {
    const Clock::TimePoint abort_at = *oldest + shutdown_;
    next = next.has_value() ? std::min(*next, abort_at) : abort_at;
  }
  return next;
}

namespace {

// "rank 2 has not submitted 'a', 'b' (waiting 61 s); ranks 3-5 have not submitted 'a' (...)".
std::string WaitingClauses(const std::vector<PendingName>& stalled, Clock::TimePoint now) {
  auto describe = [&stalled, now](const Clause& clause) {
    const Duration waited = now - stalled[clause.names.front()].first_seen;  // the oldest
    return RanksText(clause.ranks) +
           (clause.ranks.size() == 1 ? " has not submitted " : " have not submitted ") +
           NamesText(stalled, clause.names) + " (waiting " + WaitText(waited) + ")";
  };
  return DescribeClauses(stalled, describe);
}

}  // namespace

std::string PendingText(const std::vector<WatchedTable>& tables, Clock::TimePoint now) {
  const std::vector<PendingName> pending = Waiting(tables, now);
  return pending.empty() ? std::string() : WaitingClauses(pending, now);
}

std::string StallWarning(const StallInspector::Config& config,
                         const std::vector<PendingName>& stalled, Clock::TimePoint now) {
  std::string text = "stall: some ranks have not submitted tensors that others submitted " +
                     SecondsText(config.check_seconds) +
                     " or more ago (KOLO_STALL_CHECK_SECONDS): " + WaitingClauses(stalled, now);
  if (config.shutdown_seconds > 0) {
    text += "; the job aborts once a tensor has waited " + SecondsText(config.shutdown_seconds) +
            " (KOLO_STALL_SHUTDOWN_SECONDS)";
  }
  return text;
}

std::string StallAbortReason(const StallInspector::Config& config,
                             const std::vector<PendingName>& stalled) {
  auto describe = [&stalled](const Clause& clause) {
    return RanksText(clause.ranks) + " never submitted " + NamesText(stalled, clause.names);
  };
  return "stalled for " + SecondsText(config.shutdown_seconds) +
         " (KOLO_STALL_SHUTDOWN_SECONDS): " + DescribeClauses(stalled, describe);
}

}  // namespace kolo::controller
