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
    if (!PlanIfDueLocked(settings_.clock->Now(), /*force=*/false, &due)) return due;
  }
  postbox_.Flush();
  return std::nullopt;
}

std::optional<Clock::TimePoint> Controller::CheckStalls() {
  std::optional<Clock::TimePoint> next;
  {
    MutexLock lock(&mu_);
    next = CheckStallsLocked(settings_.clock->Now());
  }
  postbox_.Flush();
  return next;
}

std::optional<Clock::TimePoint> Controller::CheckStallsLocked(Clock::TimePoint now) {
  if (verdict_.aborted || verdict_.shutdown_sent) return std::nullopt;
  StallInspector::Findings findings = stall_inspector_.Inspect(negotiator_.WatchedTables(), now);
  if (!findings.warning.empty()) settings_.logger->warn("{}", findings.warning);
  if (!findings.abort_reason.empty()) {
    AbortLocked(findings.abort_reason);
    return std::nullopt;
  }
  return stall_inspector_.NextCheck(negotiator_.WatchedTables());
}

void Controller::SequencerLoop() {
  MutexLock lock(&mu_);
  while (!stop_) {
    const Clock::TimePoint now = settings_.clock->Now();
    const uint64_t queued = postbox_.queued_count();
    Clock::TimePoint window_end;
    const bool window_open = !PlanIfDueLocked(now, /*force=*/false, &window_end);
    std::optional<Clock::TimePoint> due = CheckStallsLocked(now);
    if (std::optional<Clock::TimePoint> start = CheckStartLocked(now)) {
      due = due.has_value() ? std::min(*due, *start) : *start;
    }
    if (postbox_.queued_count() > queued) {  // planned a batch or aborted: send, then look again
      lock.Unlock();
      postbox_.Flush();
      lock.Lock();
      continue;
    }
    if (window_open) due = due.has_value() ? std::min(*due, window_end) : window_end;
    if (!due.has_value()) {
      if (stall_inspector_.enabled()) {
        // Nothing is due yet, but names may become pending without waking this thread (that
        // would cost a thread switch per op): look again within a fraction of the stall
        // time, which leaves a stall timer set before the first one can be due.
        wake_.WaitFor(&mu_, settings_.stall_poll);
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
    next = CheckStartLocked(settings_.clock->Now());
  }
  postbox_.Flush();
  return next;
}

bool Controller::AbortStart(const std::string& reason) {
  bool aborted = false;
  {
    MutexLock lock(&mu_);
    if (!rendezvous_.complete() && !verdict_.aborted) {
      AbortLocked(reason);
      aborted = true;
    }
  }
  postbox_.Flush();
  return aborted;
}

std::optional<Clock::TimePoint> Controller::CheckStartLocked(Clock::TimePoint now) {
  if (settings_.options.start_timeout_seconds <= 0 || rendezvous_.complete() || verdict_.aborted) {
    return std::nullopt;
  }
  if (now < settings_.start_deadline) return settings_.start_deadline;
  std::vector<int> missing;
  for (int rank = 0; rank < settings_.options.size; ++rank) {
    if (!rendezvous_.admitted(rank)) missing.push_back(rank);
  }
  std::string ranks;
  for (size_t i = 0; i < missing.size(); ++i) {
    ranks += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + std::to_string(missing[i]);
  }
  AbortLocked((missing.size() == 1 ? "rank " : "ranks ") + ranks +
              " never connected to the controller within " +
              SecondsText(settings_.options.start_timeout_seconds) +
              " (KOLO_START_TIMEOUT_SECONDS; is every rank started, with the same "
              "KOLO_CONTROLLER?)");
  return std::nullopt;
}

}  // namespace kolo::controller
