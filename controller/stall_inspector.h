// StallInspector: notices tensors that some ranks announced and others never submit
// (DESIGN.md §5), from the first-announcement times the ReadinessTable keeps. It warns with the
// missing ranks and names, and, if configured, asks for the job to be aborted. Plain logic with
// time passed in: the Controller calls it under its lock from the sequencer step and acts on
// the findings (logs the warning, aborts). Not thread-safe.
//
// A name "has waited" t when its first announcement was t ago. Rules:
// - Warning: some pending name has waited >= check_seconds, and the last warning (if any) was
//   >= check_seconds ago. It lists every name that has waited >= check_seconds.
// - Abort: the oldest pending name has waited >= shutdown_seconds. It lists every name that has
//   waited >= shutdown_seconds, and replaces a warning due at the same step.
// Either is off when its seconds are 0; they are independent of each other.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "controller/readiness_table.h"
#include "core/clock.h"
#include "core/config/config_table.h"

namespace kolo::controller {

// A readiness table to watch, and the job rank of each of its ranks (a process set's table
// numbers its members 0, 1, ...; null: the table's ranks are job ranks).
struct WatchedTable {
  const ReadinessTable* table = nullptr;
  const std::vector<int>* ranks = nullptr;
};

class StallInspector {
 public:
  struct Config {
    // KOLO_STALL_CHECK_SECONDS; 0: no warnings.
    double check_seconds = DefaultOptions().stall_check_seconds;
    // KOLO_STALL_SHUTDOWN_SECONDS; 0: never abort.
    double shutdown_seconds = DefaultOptions().stall_shutdown_seconds;
  };

  // What an inspection found; both empty when there is nothing to do.
  struct Findings {
    std::string warning;       // a line to log as a warning
    std::string abort_reason;  // the job must abort with this reason
  };

  // Seconds must lie in the ranges of KOLO_STALL_CHECK_SECONDS and KOLO_STALL_SHUTDOWN_SECONDS
  // (core/config/config_table.cc; Controller::Config::Validate checks).
  explicit StallInspector(const Config& config);

  bool enabled() const { return check_.count() > 0 || shutdown_.count() > 0; }

  // Looks at `table` at `now` (non-decreasing from call to call). Cheap unless it finds a stall:
  // the text is built only when a warning or an abort is due. Remembers the warning's time.
  Findings Inspect(const ReadinessTable& table, Clock::TimePoint now);

  // When Inspect may next find something, given the table as it is: always later than the
  // `now` of the last Inspect that found no abort. nullopt when nothing is pending or the
  // inspector is disabled (an idle job needs no timer).
  std::optional<Clock::TimePoint> NextCheck(const ReadinessTable& table) const;
  // The same over several tables at once (the global set's and every process set's): their
  // pending names count together, oldest first, missing ranks as job ranks.
  Findings Inspect(const std::vector<WatchedTable>& tables, Clock::TimePoint now);
  std::optional<Clock::TimePoint> NextCheck(const std::vector<WatchedTable>& tables) const;

 private:
  const Config config_;
  const Clock::TimePoint::duration check_;     // 0: off
  const Clock::TimePoint::duration shutdown_;  // 0: off
  std::optional<Clock::TimePoint> last_warning_;
};

// The warning text for `stalled` (oldest first) at `now`, e.g.
//   stall: some ranks have not submitted tensors that others submitted 60 s or more ago
//   (KOLO_STALL_CHECK_SECONDS): rank 2 has not submitted 'grad/w1', 'grad/w2', 'grad/w3' and 2
//   more (waiting 61 s); ranks 3-5, 7 have not submitted 'grad/w1' (waiting 61 s)
// (one line). Ranks missing the same names share a clause, in order of their lowest rank; a
// clause's wait is that of its oldest name. With shutdown_seconds > 0 it ends with
// "; the job aborts once a tensor has waited 300 s (KOLO_STALL_SHUTDOWN_SECONDS)".
std::string StallWarning(const StallInspector::Config& config,
                         const std::vector<PendingName>& stalled, Clock::TimePoint now);

// What the pending names of `tables` wait for at `now`, in StallWarning's clauses, e.g.
//   rank 1 has not submitted 'grad/w1' (waiting 2.1 s); ranks 2, 3 have not submitted 'b'
//   (waiting 0.4 s)
// or "" when nothing is pending: what the controller adds to an abort a rank asked for
// (Runtime::AbortJob), so that a timeout names the ranks it waited for.
std::string PendingText(const std::vector<WatchedTable>& tables, Clock::TimePoint now);

// The abort reason for `stalled` (oldest first), e.g.
//   stalled for 300 s (KOLO_STALL_SHUTDOWN_SECONDS): rank 2 never submitted 'grad/w1',
//   'grad/w2', 'grad/w3' and 2 more; ranks 3-5 never submitted 'grad/w1'
std::string StallAbortReason(const StallInspector::Config& config,
                             const std::vector<PendingName>& stalled);

}  // namespace kolo::controller
