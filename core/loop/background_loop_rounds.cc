// The background loop's side of the fast path (docs/FAST-PATH.md): the I/O around FastPath's
// decisions. Round messages in from the lane and out to it, cached allreduces that leave the
// path out to the controller, and the decided work run in order. Loop thread only.
#include <sched.h>

#include "core/loop/background_loop.h"

namespace kolo {
namespace {

// See Config::busy_poll: a peer that has its tensor ready answers within one loopback transit.
constexpr std::chrono::microseconds kRoundSpin{60};

}  // namespace

void BackgroundLoop::PollLane(Clock::TimePoint now) {
  std::vector<std::pair<int, RoundMessage>> messages;
  std::vector<int> closed;
  Status polled = lane_->Poll(&messages, &closed);
  for (auto& [from, message] : messages) {
    if (!polled.ok()) break;
    polled = fast_->ReceiveRound(from, std::move(message), now);
  }
  if (!polled.ok()) {
    Abort(RootCause(polled), TellController::kYes);
    return;
  }
  for (int r : closed) fast_->PeerClosed(r);
}

void BackgroundLoop::StepRounds() {
  for (int pass = 0; serving(); ++pass) {
    if (pass > 0) {  // what the previous pass ran may have taken a while
      DrainControl();
      RunTasks();
      if (!serving()) return;
    }
    const Clock::TimePoint now = clock_->Now();
    PollLane(now);
    if (!serving()) return;
    FastPath::Outbox out;
    Status advanced = fast_->Advance(now, &out);
    SendCachedRequests(out.to_controller);
    if (!advanced.ok()) {
      Abort(advanced, TellController::kYes);
      return;
    }
    if (out.round && serving()) {
      Status sent = lane_->SendToAll(*out.round);
      if (!sent.ok()) Abort(RootCause(sent), TellController::kYes);
    }
    bool progress = out.progress;
    if (RunDecided()) {
      progress = true;
      // A driving caller's op is done: the rest of the pass is the next one's, on whichever
      // thread runs it (the caller's return is the op's latency).
      if (drive_done_ != nullptr && (*drive_done_)()) return;
    }
    if (TensorEntry* join = fast_->TakeReleasedJoin(); join != nullptr && serving()) {
      WorkerMessage batch;
      batch.kind = WorkerMessage::Kind::kRequests;
      batch.requests.push_back(MakeRequest(*join));
      SendRequests(batch);
    }
    if (!progress && !SpinForAnswer()) break;
  }
  if (!serving()) return;
  Status late = fast_->CheckDeadlines(clock_->Now());
  if (!late.ok()) Abort(RootCause(late), TellController::kYes);
}

bool BackgroundLoop::SpinForAnswer() const {
  if (!config_.busy_poll || !fast_->waiting() ||
      clock_->Now() - fast_->waiting_since() >= kRoundSpin) {
    return false;
  }
  sched_yield();
  return true;
}

void BackgroundLoop::SendCachedRequests(const std::vector<uint32_t>& ids) {
  if (ids.empty() || !serving()) return;
  WorkerMessage batch;
  batch.kind = WorkerMessage::Kind::kRequests;
  for (uint32_t id : ids) {
    Request request;
    request.cache_id = id;
    batch.requests.push_back(request);
  }
  logger_->debug("fast path: {} cached tensor(s) go to the controller", ids.size());
  SendRequests(batch);
}

bool BackgroundLoop::RunDecided() {
  bool ran = false;
  while (serving()) {
    FastPath::Work& work = fast_work_;
    if (!fast_->NextWork(clock_->Now(), &work)) break;
    ran = true;
    if (work.from_controller) {
      RunControllerResponse(work.response);
    } else {
      RunFastWork(work);
    }
  }
  return ran;
}

void BackgroundLoop::RunFastWork(FastPath::Work& work) {
  for (size_t i = 0; i < work.entries.size(); ++i) {
    // Joined without it: this rank contributes zeros.
    if (work.entries[i] == nullptr) work.entries[i] = StandIn(work.response, i);
  }
  Execute(work.response, work.entries);
}

}  // namespace kolo
