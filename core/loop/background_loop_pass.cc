// The background loop's pass and its life: what one pass does, in order, with its
// collaborators, how it handles the controller's messages, and how the job ends (the life's
// steps, an abort, the end once nothing launched is in flight).
#include <thread>

#include "core/check.h"
#include "core/loop/background_loop.h"

namespace kolo {
namespace {

// How often a driving caller polls for the controller's verdict on a failed collective.
constexpr std::chrono::milliseconds kDrivingPoll{1};

Status ShutDownBeforeCompletion() {
  return ShutdownError("kolo was shut down before this op completed");
}

}  // namespace

void BackgroundLoop::Pass() {
  DrainControl();
  DrainAsyncFailures();
  tasks_.RunPending();
  if (state_ == LoopState::kAborted && stop_requested_) Finish();
  if (!serving()) return;
  // Read the flag before draining the queue: Stop() closes the queue before it sets the
  // flag, so every op enqueued before a stop we see here is sent ahead of the notice (the
  // controller refuses announcements after a rank's notice).
  if (state_ == LoopState::kRunning && stop_requested_) {
    MoveTo(LoopState::kStopRequested);
    if (fast_ != nullptr) fast_->SetStopping();
  }
  SendNewRequests();
  if (rounds_ != nullptr) StepRounds();
  if (serving()) session_.KeepAlive();
  AdvanceLife();
}

void BackgroundLoop::DrainControl() {
  while (state_ != LoopState::kDone) {
    StatusOr<std::optional<ControllerMessage>> next = session_.TryReceive();
    if (!next.ok()) {
      AbortOn(Fault::FromController(next.status()));
      if (stop_requested_) Finish();
      return;
    }
    if (!next->has_value()) return;
    HandleMessage(**next);
  }
}

void BackgroundLoop::HandleMessage(const ControllerMessage& message) {
  switch (message.kind) {
    case ControllerMessage::Kind::kResponses:
      for (const Response& response : message.responses) {
        if (!serving()) return;
        // With the fast path, a response runs once a round decided where it goes in the order.
        AbortOn(fast_ != nullptr ? Fault::Here(fast_->ReceiveResponse(response))
                                 : runner_.RunControllerResponse(response));
      }
      return;
    case ControllerMessage::Kind::kAbort:
      AbortOn(Fault::FromController(Aborted(message.reason)));
      return;
    case ControllerMessage::Kind::kShutdown:
      HandleShutdown();
      return;
    case ControllerMessage::Kind::kPong:
      if (session_.TakePong(message) && serving()) session_.SendClockPing();
      return;
    case ControllerMessage::Kind::kWelcome:
      AbortOn(Fault::Here(Internal("protocol error: a second Welcome from the controller")));
      return;
  }
}

void BackgroundLoop::HandleShutdown() {
  logger_->debug("job-wide shutdown received");
  if (!serving()) return;
  if (state_ != LoopState::kDraining) {
    // The controller sends it once every rank's notice arrived, this rank's included.
    AbortOn(Fault::Here(
        Internal(std::string("protocol error: the job-wide Shutdown arrived while this rank ") +
                 "was " + LoopStateName(state_) + ", before its own shutdown notice")));
    return;
  }
  if (fast_ != nullptr) {
    MoveTo(LoopState::kFinishing);  // done once every response received has run (AdvanceLife)
    return;
  }
  FailAll(ShutDownBeforeCompletion());
  Finish();
}

void BackgroundLoop::SendNewRequests() {
  queue_->TakeNew(&fresh_);
  if (fresh_.empty()) return;
  WorkerMessage batch;  // what the fast path does not take: its requests stay unallocated
  batch.kind = WorkerMessage::Kind::kRequests;
  const Clock::TimePoint now = clock_->Now();
  for (TensorEntry* entry : fresh_) {
    if (entry->meta.op == OpType::kJoin) runner_.NoteJoin(*entry);
    Request request = runner_.RequestFor(*entry);
    if (rounds_ != nullptr && rounds_->Take(entry, request.cache_id, now)) continue;
    batch.requests.push_back(std::move(request));
  }
  if (batch.requests.empty()) return;
  logger_->trace("sending {} requests", batch.requests.size());
  AbortOn(Fault::FromController(session_.Send(batch)));
}

void BackgroundLoop::StepRounds() {
  for (bool first = true; serving(); first = false) {
    if (!first) {  // what the previous step ran may have taken a while
      DrainControl();
      tasks_.RunPending();
      if (!serving()) return;
    }
    const RoundDriver::Step step = rounds_->StepOnce(drive_done_);
    AbortOn(step.fault);
    if (!step.fault.ok() || step.caller_done) return;
    if (!step.progress && !rounds_->SpinForAnswer()) break;
  }
  if (serving()) AbortOn(rounds_->CheckDeadlines());
}

void BackgroundLoop::DrainAsyncFailures() {
  for (const AsyncOps::Failure& failure : async_.TakeFailures()) {
    failure.Reclaim();
    if (serving() && !async_.ShutdownInterrupt(failure.status())) {
      // The first failure aborts the job; its FailAll now includes these entries.
      AbortOn(Fault::InCollective(failure.status()));
    } else {
      // Failed because the job aborted (with the root cause) or ended with the op in flight.
      failure.Complete(completer_, serving() ? failure.status() : final_status_);
    }
  }
}

void BackgroundLoop::AdvanceLife() {
  switch (state_) {
    case LoopState::kStopRequested: {
      // With the fast path, the notice waits until this rank's stopping round went out and
      // nothing waits for a round any more: the job-wide Shutdown it leads to lets peers leave.
      if (fast_ != nullptr && !fast_->Settled()) return;
      const Status sent = session_.SendStopNotice();
      if (!sent.ok()) {
        AbortOn(Fault::FromController(sent));
        return;
      }
      MoveTo(LoopState::kDraining);
      stop_deadline_ = clock_->Now() + DurationOf(options_.timeout_seconds);
      return;
    }
    case LoopState::kDraining:
      if (clock_->Now() < stop_deadline_) return;
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
      if (fast_->Done()) {
        FailAll(ShutDownBeforeCompletion());
        Finish();
      }
      return;
    default:
      return;
  }
}

void BackgroundLoop::MoveTo(LoopState next) {
  // A broken invariant of this file, not a runtime condition.
  KOLO_CHECK(LoopTransitionAllowed(state_, next))
      << "background loop: no transition from " << LoopStateName(state_) << " to "
      << LoopStateName(next);
  logger_->debug("background loop: {} -> {}", LoopStateName(state_), LoopStateName(next));
  state_ = next;
}

void BackgroundLoop::AbortOn(const Fault& fault) {
  if (fault.ok() || !serving()) return;
  Status why = fault.why();
  auto wait = [this](Clock::TimePoint until) KOLO_REQUIRES(loop_mu_) {
    if (drive_done_ != nullptr) {
      // On a driving caller: the loop's own thread may be asleep on wakeup_, which takes one
      // waiter. Poll instead.
      std::this_thread::sleep_for(kDrivingPoll);
    } else {
      Sleep(until);
    }
  };
  if (fault.origin() == Fault::Origin::kInCollective) why = session_.RootCause(why, wait);
  if (fault.origin() == Fault::Origin::kRequested) {
    // The controller adds who had not submitted what; its verdict comes back at once.
    session_.SendAbortNotice(why);
    why = session_.RootCause(why, wait);
  }
  MoveTo(LoopState::kAborted);
  final_status_ = why;
  logger_->error("job aborted: {}", why.message());
  queue_->Close(why);
  data_plane_->Interrupt(why);
  executor_->Interrupt(why);
  if (fault.origin() == Fault::Origin::kHere || fault.origin() == Fault::Origin::kInCollective) {
    session_.SendAbortNotice(why);
  }
  FailAll(why);
}

void BackgroundLoop::FailAll(const Status& why) {
  if (fast_ != nullptr) fast_->DropEntries();  // they point into the queue's table
  completer_.FailQueued(why);
}

void BackgroundLoop::Finish() {
  DrainAsyncFailures();
  const Status interrupted =
      async_.AwaitInFlight([this](Clock::TimePoint deadline) KOLO_REQUIRES(loop_mu_) {
        Sleep(deadline);
        DrainAsyncFailures();
      });
  if (!interrupted.ok() && final_status_.ok()) final_status_ = interrupted;
  MoveTo(LoopState::kDone);
}

}  // namespace kolo
