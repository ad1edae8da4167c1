// The background loop's control stream: what it sends the controller (requests, the stop
// notice, keepalives and clock pings), what it does with each message it receives, and how it
// asks the controller for the root cause of a failed collective. Loop thread only.
#include <chrono>
#include <optional>
#include <thread>

#include "core/loop/background_loop.h"

namespace kolo {
namespace {

// The control stream broke while the job ran: the controller (rank 0's process) is gone or
// unreachable. Said first, so that it is not mistaken for one more lost peer.
Status ControllerLost(const Status& stream_error) {
  return stream_error.WithContext("controller lost");
}

// How often a driving caller polls for the controller's verdict (RootCause).
constexpr std::chrono::milliseconds kDrivingPoll{1};

}  // namespace

void BackgroundLoop::SendStopNotice() {
  WorkerMessage notice;
  notice.kind = WorkerMessage::Kind::kShutdown;
  Status sent = channel_->Send(notice);
  if (!sent.ok()) {
    Abort(ControllerLost(sent), TellController::kNo);
    return;
  }
  MoveTo(LoopState::kDraining);
  stop_deadline_ = clock_->Now() + DurationOf(config_.timeout_seconds);
}

void BackgroundLoop::DrainControl() {
  while (state_ != LoopState::kDone) {
    StatusOr<std::optional<ControllerMessage>> next = channel_->TryReceive();
    if (!next.ok()) {
      Abort(ControllerLost(next.status()), TellController::kNo);
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
        if (!fast_path_on()) {
          RunControllerResponse(response);
          continue;
        }
        // Runs once a round has decided where it goes in the order (RunDecided).
        Status received = fast_->ReceiveResponse(response);
        if (!received.ok()) {
          Abort(received, TellController::kYes);
          return;
        }
      }
      return;
    case ControllerMessage::Kind::kAbort:
      Abort(Aborted(message.reason), TellController::kNo);
      return;
    case ControllerMessage::Kind::kShutdown:
      HandleShutdown();
      return;
    case ControllerMessage::Kind::kPong:
      HandlePong(message);
      return;
    case ControllerMessage::Kind::kWelcome:
      Abort(Internal("protocol error: a second Welcome from the controller"), TellController::kYes);
      return;
  }
}

void BackgroundLoop::HandleShutdown() {
  logger_->debug("job-wide shutdown received");
  if (!serving()) return;
  if (state_ != LoopState::kDraining) {
    // The controller sends it once every rank's notice arrived, this rank's included.
    Abort(Internal(std::string("protocol error: the job-wide Shutdown arrived while this rank ") +
                   "was " + LoopStateName(state_) + ", before its own shutdown notice"),
          TellController::kYes);
    return;
  }
  if (fast_path_on()) {
    MoveTo(LoopState::kFinishing);  // done once every response received has run (AdvanceLife)
    return;
  }
  FailAll(ShutDownBeforeCompletion());
  Finish();
}

namespace {
constexpr int kClockSamples = 5;

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void BackgroundLoop::SendClockPing() {
  if (!config_.on_clock_offset || !serving()) return;
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  ping.ping_unix_us = UnixMicros();
  // Best effort: a failed send shows up as a broken stream on the next receive.
  channel_->Send(ping).IgnoreError();
}

void BackgroundLoop::SendKeepalive() {
  const Clock::TimePoint now = clock_->Now();
  if (!serving() || now - last_keepalive_ < DurationOf(config_.timeout_seconds / 4)) {
    return;
  }
  last_keepalive_ = now;
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  ping.ping_unix_us = 0;  // a keepalive: the controller does not answer
  // Best effort: a failed send shows up as a broken stream on the next receive.
  channel_->Send(ping).IgnoreError();
}

void BackgroundLoop::HandlePong(const ControllerMessage& pong) {
  if (!config_.on_clock_offset) return;
  const int64_t now = UnixMicros();
  const double rtt = static_cast<double>(now - pong.ping_unix_us);
  if (rtt >= 0 && (clock_samples_ == 0 || rtt < best_clock_rtt_us_)) {
    best_clock_rtt_us_ = rtt;
    const double midpoint = (static_cast<double>(pong.ping_unix_us) + static_cast<double>(now)) / 2;
    config_.on_clock_offset(static_cast<double>(pong.controller_unix_us) - midpoint, rtt);
  }
  if (++clock_samples_ < kClockSamples) SendClockPing();
}

Request BackgroundLoop::MakeRequest(const TensorEntry& entry) {
  Request request;
  auto it = cache_.find(entry.meta.name);
  if (it != cache_.end() && it->second.meta == entry.meta) {
    request.cache_id = it->second.id;
  } else {
    request.meta = entry.meta;
  }
  return request;
}

void BackgroundLoop::SendNewRequests() {
  std::vector<TensorEntry*>& fresh = fresh_entries_;
  queue_->TakeNew(&fresh);
  if (fresh.empty()) return;
  WorkerMessage batch;  // what the fast path does not take: its requests stay unallocated
  batch.kind = WorkerMessage::Kind::kRequests;
  const Clock::TimePoint now = clock_->Now();
  for (TensorEntry* entry : fresh) {
    if (entry->meta.op == OpType::kJoin && entry->meta.process_set != 0) {
      joined_sets_.push_back(entry->meta.process_set);
    } else if (entry->meta.op == OpType::kJoin) {
      joined_ = true;
      if (fast_path_on()) {
        fast_->SetJoined(true);
        // This rank's waiting cached allreduces come first, as they would on the
        // controller's stream: the join goes out once they are decided (StepRounds).
        if (fast_->HoldJoin(entry)) continue;
      }
    }
    Request request = MakeRequest(*entry);
    if (fast_path_on() && entry->meta.process_set == 0) {  // the fast path is the global set's
      if (fast_->Offer(entry, request.cache_id, now)) continue;
      if (request.cache_id == 0) {
        // Its metadata changed: the peers' cached copies must meet it at the controller
        // (which names the mismatch) instead of waiting for a round.
        auto slot = cache_.find(entry->meta.name);
        if (slot != cache_.end()) fast_->DivertChanged(slot->second.id);
      }
    }
    batch.requests.push_back(std::move(request));
  }
  if (batch.requests.empty()) return;
  logger_->trace("sending {} requests", batch.requests.size());
  SendRequests(batch);
}

void BackgroundLoop::SendRequests(const WorkerMessage& batch) {
  if (batch.requests.empty()) return;
  Status sent = channel_->Send(batch);
  if (!sent.ok()) Abort(ControllerLost(sent), TellController::kNo);
}

Status BackgroundLoop::RootCause(const Status& local) {
  // A peer that closed its connection: the controller hears of it at once. A timeout: the
  // peer named may itself be waiting for a stopped rank further up the ring; the controller's
  // keepalive names the stopped one within a quarter timeout of ours (grpc_keepalive.h).
  const double grace = local.code() == StatusCode::kDeadlineExceeded
                           ? config_.timeout_seconds / 2
                           : std::min(config_.timeout_seconds / 4, 1.0);
  const Clock::TimePoint until = clock_->Now() + DurationOf(grace);
  for (;;) {
    StatusOr<std::optional<ControllerMessage>> next = channel_->TryReceive();
    if (!next.ok()) return ControllerLost(next.status());
    if (next->has_value()) {
      if ((*next)->kind == ControllerMessage::Kind::kAbort) return Aborted((*next)->reason);
      continue;  // responses after a failed one never run: the job aborts
    }
    if (clock_->Now() >= until) return local;
    if (drive_done_ != nullptr) {  // on a driving caller
      // The loop's own thread may be asleep on wakeup_, which takes one waiter: poll instead.
      std::this_thread::sleep_for(kDrivingPoll);
    } else {
      Sleep(until);
    }
  }
}

}  // namespace kolo
