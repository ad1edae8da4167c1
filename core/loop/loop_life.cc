// LoopLife: the loop's life steps, its abort and its end (core/loop/loop_life.h).
#include "core/loop/loop_life.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "core/check.h"

namespace kolo {
namespace {

// How often a driving caller polls for the controller's verdict on a failed collective.
constexpr std::chrono::milliseconds kDrivingPoll{1};

Status ShutDownBeforeCompletion() {
  return ShutdownError("kolo was shut down before this op completed");
}

}  // namespace

void SleepUntil(Wakeup* wakeup, const Clock* clock, Clock::TimePoint deadline,
                const std::vector<int>& fds) {
  const Clock::TimePoint::duration left =
      std::clamp<Clock::TimePoint::duration>(deadline - clock->Now(), {}, kMaxIdleWait);
  wakeup->WaitUntil(std::chrono::steady_clock::now() + left, fds);
}

LoopLife::LoopLife(const Options& options, Parts parts, Logger logger)
    : options_(options), parts_(parts), logger_(std::move(logger)) {}

void LoopLife::Advance() {
  switch (state_) {
    case LoopState::kStopRequested: {
      // With the fast path, the notice waits until this rank's stopping round went out and
      // nothing waits for a round any more: the job-wide Shutdown it leads to lets peers leave.
      if (parts_.rounds != nullptr && !parts_.rounds->fast().Settled()) return;
      const Status sent = parts_.session->SendStopNotice();
      if (!sent.ok()) {
        AbortOn(Fault::FromController(sent));
        return;
      }
      MoveTo(LoopState::kDraining);
      stop_deadline_ = parts_.clock->Now() + DurationOf(options_.timeout_seconds);
      return;
    }
    case LoopState::kDraining:
      if (parts_.clock->Now() < stop_deadline_) return;
      final_status_ = DeadlineExceeded("shutdown: not every rank called shutdown() within " +
                                       SecondsText(options_.timeout_seconds) +
                                       " (KOLO_TIMEOUT_SECONDS); leaving without them");
      logger_->warn("{}", final_status_.message());
      FailAll(ShutDownBeforeCompletion());
      Finish();
      return;
    case LoopState::kFinishing:
      // Every rank did call shutdown(); what is left to run is bounded by the fast path's own
      // deadlines.
      if (parts_.rounds->fast().Done()) {
        FailAll(ShutDownBeforeCompletion());
        Finish();
      }
      return;
    default:
      return;
  }
}

void LoopLife::OnShutdown() {
  logger_->debug("job-wide shutdown received");
  if (!serving()) return;
  if (state_ != LoopState::kDraining) {
    // The controller sends it once every rank's notice arrived, this rank's included.
    AbortOn(Fault::Here(
        Internal(std::string("protocol error: the job-wide Shutdown arrived while this rank ") +
                 "was " + LoopStateName(state_) + ", before its own shutdown notice")));
    return;
  }
  if (parts_.rounds != nullptr) {
    MoveTo(LoopState::kFinishing);  // done once every response received has run (Advance)
    return;
  }
  FailAll(ShutDownBeforeCompletion());
  Finish();
}

void LoopLife::MoveTo(LoopState next) {
  // A broken invariant of this file, not a runtime condition.
  KOLO_CHECK(LoopTransitionAllowed(state_, next))
      << "background loop: no transition from " << LoopStateName(state_) << " to "
      << LoopStateName(next);
  logger_->debug("background loop: {} -> {}", LoopStateName(state_), LoopStateName(next));
  state_ = next;
}

void LoopLife::AbortOn(const Fault& fault) {
  if (fault.ok() || !serving()) return;
  Status why = fault.why();
  auto wait = [this](Clock::TimePoint until) {
    if (drive_done_ != nullptr) {
      // On a driving caller: the loop's own thread may be asleep on wakeup_, which takes one
      // waiter. Poll instead.
      std::this_thread::sleep_for(kDrivingPoll);
    } else {
      SleepUntil(parts_.wakeup, parts_.clock, until);
    }
  };
  if (fault.origin() == Fault::Origin::kInCollective) why = parts_.session->RootCause(why, wait);
  if (fault.origin() == Fault::Origin::kRequested) {
    // The controller adds who had not submitted what; its verdict comes back at once.
    parts_.session->SendAbortNotice(why);
    why = parts_.session->RootCause(why, wait);
  }
  MoveTo(LoopState::kAborted);
  final_status_ = why;
  logger_->error("job aborted: {}", why.message());
  parts_.queue->Close(why);
  parts_.data_plane->Interrupt(why);
  parts_.executor->Interrupt(why);
  if (fault.origin() == Fault::Origin::kHere || fault.origin() == Fault::Origin::kInCollective) {
    parts_.session->SendAbortNotice(why);
  }
  FailAll(why);
}

void LoopLife::FailAll(const Status& why) {
  if (parts_.rounds != nullptr) parts_.rounds->DropEntries();  // they point into the queue's table
  parts_.completer->FailQueued(why);
}

void LoopLife::DrainAsyncFailures() {
  for (const AsyncOps::Failure& failure : parts_.async->TakeFailures()) {
    failure.Reclaim();
    if (serving() && !parts_.async->ShutdownInterrupt(failure.status())) {
      // The first failure aborts the job; its FailAll now includes these entries.
      AbortOn(Fault::InCollective(failure.status()));
    } else {
      // Failed because the job aborted (with the root cause) or ended with the op in flight.
      failure.Complete(*parts_.completer, serving() ? failure.status() : final_status_);
    }
  }
}

void LoopLife::Finish() {
  DrainAsyncFailures();
  const Status interrupted = parts_.async->AwaitInFlight([this](Clock::TimePoint deadline) {
    SleepUntil(parts_.wakeup, parts_.clock, deadline);
    DrainAsyncFailures();
  });
  if (!interrupted.ok() && final_status_.ok()) final_status_ = interrupted;
  MoveTo(LoopState::kDone);
}

}  // namespace kolo
