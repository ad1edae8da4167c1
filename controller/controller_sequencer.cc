// The controller's sequencer side (controller.h): the thread that closes fusion windows on
// time, runs the stall inspector and enforces the start timeout, and the single steps it takes
// (also called directly by tests with a fake clock).
#include <algorithm>
#include <string>
#include <vector>

#include "controller/controller.h"
#include "core/mutex.h"

namespace kolo::controller {

std::optional<Clock::TimePoint> Controller::RunCycle() {
  Clock::TimePoint due;
  {
    MutexLock lock(&mu_);
    if (!PlanIfDueLocked(clock_->Now(), /*force=*/false, &due)) return due;
  }
  Flush();
  return std::nullopt;
}

std::optional<Clock::TimePoint> Controller::CheckStalls() {
  std::optional<Clock::TimePoint> next;
  {
    MutexLock lock(&mu_);
    next = CheckStallsLocked(clock_->Now());
  }
  Flush();
  return next;
}

std::optional<Clock::TimePoint> Controller::CheckStallsLocked(Clock::TimePoint now) {
  if (aborted_ || shutdown_sent_) return std::nullopt;
  StallInspector::Findings findings = stall_inspector_.Inspect(negotiator_.WatchedTables(), now);
  if (!findings.warning.empty()) logger_->warn("{}", findings.warning);
  if (!findings.abort_reason.empty()) {
    AbortLocked(findings.abort_reason);
    return std::nullopt;
  }
  return stall_inspector_.NextCheck(negotiator_.WatchedTables());
}

void Controller::SequencerLoop() {
  MutexLock lock(&mu_);
  while (!stop_) {
    const Clock::TimePoint now = clock_->Now();
    const size_t queued = outgoing_.size();
    Clock::TimePoint window_end;
    const bool window_open = !PlanIfDueLocked(now, /*force=*/false, &window_end);
    std::optional<Clock::TimePoint> due = CheckStallsLocked(now);
    if (std::optional<Clock::TimePoint> start = CheckStartLocked(now)) {
      due = due.has_value() ? std::min(*due, *start) : *start;
    }
    if (outgoing_.size() > queued) {  // planned a batch or aborted: send, then look again
      lock.Unlock();
      Flush();
      lock.Lock();
      continue;
    }
    if (window_open) due = due.has_value() ? std::min(*due, window_end) : window_end;
    if (!due.has_value()) {
      if (stall_inspector_.enabled()) {
        // Nothing is due yet, but names may become pending without waking this thread (that
        // would cost a thread switch per op): look again within a fraction of the stall
        // time, which leaves a stall timer set before the first one can be due.
        wake_.WaitFor(&mu_, stall_poll_);
      } else {
        wake_.Wait(&mu_);  // idle: no timer, no traffic; Stop() sets stop_ and wakes it
      }
      continue;
    }
    // The fusion window (at most one cycle) or the next stall check, whichever is first. Both
    // lie after `now`, so this never spins; an early wake-up just recomputes.
    wake_.WaitFor(&mu_, *due - now);
  }
}

std::optional<Clock::TimePoint> Controller::CheckStart() {
  std::optional<Clock::TimePoint> next;
  {
    MutexLock lock(&mu_);
    next = CheckStartLocked(clock_->Now());
  }
  Flush();
  return next;
}

bool Controller::AbortStart(const std::string& reason) {
  bool aborted = false;
  {
    MutexLock lock(&mu_);
    if (!rendezvous_.complete() && !aborted_) {
      AbortLocked(reason);
      aborted = true;
    }
  }
  Flush();
  return aborted;
}

std::optional<Clock::TimePoint> Controller::CheckStartLocked(Clock::TimePoint now) {
  if (options_.start_timeout_seconds <= 0 || rendezvous_.complete() || aborted_) {
    return std::nullopt;
  }
  if (now < start_deadline_) return start_deadline_;
  std::vector<int> missing;
  for (int rank = 0; rank < options_.size; ++rank) {
    if (!rendezvous_.admitted(rank)) missing.push_back(rank);
  }
  std::string ranks;
  for (size_t i = 0; i < missing.size(); ++i) {
    ranks += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + std::to_string(missing[i]);
  }
  AbortLocked((missing.size() == 1 ? "rank " : "ranks ") + ranks +
              " never connected to the controller within " +
              SecondsText(options_.start_timeout_seconds) +
              " (KOLO_START_TIMEOUT_SECONDS; is every rank started, with the same "
              "KOLO_CONTROLLER?)");
  return std::nullopt;
}

}  // namespace kolo::controller
