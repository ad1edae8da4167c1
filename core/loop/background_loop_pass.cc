// The background loop's pass: what one pass does, in order, with its collaborators, and how
// it handles the controller's messages. The life's steps, an abort and the end are LoopLife's
// (core/loop/loop_life.h).
#include <string>
#include <vector>

#include "core/loop/background_loop.h"

namespace kolo {

void BackgroundLoop::Pass() {
  DrainControl();
  life_.DrainAsyncFailures();
  tasks_.RunPending();
  if (life_.state() == LoopState::kAborted && stop_requested_) life_.Finish();
  if (!life_.serving()) return;
  // Read the flag before draining the queue: Stop() closes the queue before it sets the
  // flag, so every op enqueued before a stop we see here is sent ahead of the notice (the
  // controller refuses announcements after a rank's notice).
  if (life_.state() == LoopState::kRunning && stop_requested_) {
    life_.MoveTo(LoopState::kStopRequested);
    if (rounds_ != nullptr) rounds_->SetStopping();
  }
  SendNewRequests();
  if (rounds_ != nullptr) StepRounds();
  if (life_.serving()) session_.KeepAlive();
  life_.Advance();
}

void BackgroundLoop::DrainControl() {
  while (life_.state() != LoopState::kDone) {
    StatusOr<std::optional<ControllerMessage>> next = session_.TryReceive();
    if (!next.ok()) {
      life_.AbortOn(Fault::FromController(next.status()));
      if (stop_requested_) life_.Finish();
      return;
    }
    if (!next->has_value()) return;
    HandleMessage(**next);
  }
}

namespace {

// Offers the group whose first member is fresh[first] to the fast path, all members or none
// (docs/FAST-PATH.md, "Which ops"); what it does not take goes into `batch`. Its members reach
// the loop together (TensorQueue::EnqueueGroup), one after another. Returns the index past it.
size_t OfferGroup(const std::vector<TensorEntry*>& fresh, size_t first, const OpCache& cache,
                  RoundDriver* rounds, Clock::TimePoint now, WorkerMessage* batch) {
  const std::string& group = fresh[first]->meta.group;
  size_t end = first;
  while (end < fresh.size() && fresh[end]->meta.group == group) ++end;
  const std::vector<TensorEntry*> members(fresh.begin() + static_cast<std::ptrdiff_t>(first),
                                          fresh.begin() + static_cast<std::ptrdiff_t>(end));
  std::vector<uint32_t> ids;
  const size_t start = batch->requests.size();
  for (TensorEntry* entry : members) {
    batch->requests.push_back(cache.RequestFor(*entry));
    ids.push_back(batch->requests.back().cache_id);
  }
  if (rounds->TakeGroup(members, ids, now)) batch->requests.resize(start);
  return end;
}

}  // namespace

void BackgroundLoop::HandleMessage(const ControllerMessage& message) {
  switch (message.kind) {
    case ControllerMessage::Kind::kResponses:
      for (const Response& response : message.responses) {
        if (!life_.serving()) return;
        // With the fast path, a response runs once a round decided where it goes in the order.
        life_.AbortOn(rounds_ != nullptr ? rounds_->Receive(response)
                                         : runner_.RunControllerResponse(response));
      }
      return;
    case ControllerMessage::Kind::kAbort:
      life_.AbortOn(Fault::FromController(Aborted(message.reason)));
      return;
    case ControllerMessage::Kind::kShutdown:
      life_.OnShutdown();
      return;
    case ControllerMessage::Kind::kPong:
      if (session_.TakePong(message) && life_.serving()) session_.SendClockPing();
      return;
    case ControllerMessage::Kind::kWelcome:
      life_.AbortOn(Fault::Here(Internal("protocol error: a second Welcome from the controller")));
      return;
  }
}

void BackgroundLoop::SendNewRequests() {
  queue_->TakeNew(&fresh_);
  if (fresh_.empty()) return;
  WorkerMessage batch;  // what the fast path does not take: its requests stay unallocated
  batch.kind = WorkerMessage::Kind::kRequests;
  const Clock::TimePoint now = clock_->Now();
  for (size_t i = 0; i < fresh_.size(); ++i) {
    TensorEntry* entry = fresh_[i];
    if (rounds_ != nullptr && !entry->meta.group.empty()) {
      i = OfferGroup(fresh_, i, runner_.cache(), rounds_.get(), now, &batch) -
          1;  // its members, all or none (docs/FAST-PATH.md)
      continue;
    }
    if (entry->meta.op == OpType::kJoin) runner_.NoteJoin(*entry);
    Request request = runner_.cache().RequestFor(*entry);
    // A barrier takes the rounds only with nothing of this rank's before it in flight.
    const bool behind =
        entry->meta.op == OpType::kBarrier && (i != 0 || queue_->InFlight() != fresh_.size());
    if (rounds_ != nullptr && rounds_->Take(entry, request.cache_id, now, behind)) continue;
    batch.requests.push_back(std::move(request));
  }
  if (batch.requests.empty()) return;
  logger_->trace("sending {} requests", batch.requests.size());
  life_.AbortOn(Fault::FromController(session_.Send(batch)));
}

void BackgroundLoop::StepRounds() {
  for (bool first = true; life_.serving(); first = false) {
    if (!first) {  // what the previous step ran may have taken a while
      DrainControl();
      tasks_.RunPending();
      if (!life_.serving()) return;
    }
    const RoundDriver::Step step = rounds_->StepOnce(life_.driving());
    life_.AbortOn(step.fault);
    if (!step.fault.ok() || step.caller_done) return;
    if (!step.progress && !rounds_->SpinForAnswer()) break;
  }
  if (life_.serving()) life_.AbortOn(rounds_->CheckDeadlines());
}

}  // namespace kolo
