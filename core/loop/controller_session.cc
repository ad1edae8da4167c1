#include "core/loop/controller_session.h"

#include <algorithm>
#include <chrono>

namespace kolo {
namespace {

// The control stream broke while the job ran: the controller (rank 0's process) is gone or
// unreachable. Said first, so that it is not mistaken for one more lost peer.
Status ControllerLost(const Status& stream_error) {
  return stream_error.WithContext("controller lost");
}

constexpr int kClockSamples = 5;

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ControllerSession::ControllerSession(Config config, ControlChannel* channel, const Clock* clock)
    : config_(std::move(config)), channel_(channel), clock_(clock) {}

Status ControllerSession::Send(const WorkerMessage& message) {
  Status sent = channel_->Send(message);
  if (!sent.ok()) return ControllerLost(sent);
  return sent;
}

Status ControllerSession::SendStopNotice() {
  WorkerMessage notice;
  notice.kind = WorkerMessage::Kind::kShutdown;
  return Send(notice);
}

void ControllerSession::SendAbortNotice(const Status& why) {
  WorkerMessage notice;
  notice.kind = WorkerMessage::Kind::kAbort;
  notice.reason = why.message();
  // The stream may be what failed; the controller then learns of it from the stream's end.
  channel_->Send(notice).IgnoreError();
}

StatusOr<std::optional<ControllerMessage>> ControllerSession::TryReceive() {
  StatusOr<std::optional<ControllerMessage>> next = channel_->TryReceive();
  if (!next.ok()) return ControllerLost(next.status());
  return next;
}

void ControllerSession::SendClockPing() {
  if (!config_.on_clock_offset) return;
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  ping.ping_unix_us = UnixMicros();
  // Best effort: a failed send shows up as a broken stream on the next receive.
  channel_->Send(ping).IgnoreError();
}

bool ControllerSession::TakePong(const ControllerMessage& pong) {
  if (!config_.on_clock_offset) return false;
  const int64_t now = UnixMicros();
  const double rtt = static_cast<double>(now - pong.ping_unix_us);
  if (rtt >= 0 && (clock_samples_ == 0 || rtt < best_clock_rtt_us_)) {
    best_clock_rtt_us_ = rtt;
    const double midpoint = (static_cast<double>(pong.ping_unix_us) + static_cast<double>(now)) / 2;
    config_.on_clock_offset(static_cast<double>(pong.controller_unix_us) - midpoint, rtt);
  }
  return ++clock_samples_ < kClockSamples;
}

void ControllerSession::KeepAlive() {
  const Clock::TimePoint now = clock_->Now();
  if (now - last_keepalive_ < DurationOf(config_.timeout_seconds / 4)) return;
  last_keepalive_ = now;
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  ping.ping_unix_us = 0;  // a keepalive: the controller does not answer
  // Best effort: a failed send shows up as a broken stream on the next receive.
  channel_->Send(ping).IgnoreError();
}

Status ControllerSession::RootCause(const Status& local,
                                    const std::function<void(Clock::TimePoint until)>& wait) {
  // A peer that closed its connection: the controller hears of it at once. A timeout: the
  // peer named may itself be waiting for a stopped rank further up the ring; the controller's
  // keepalive names the stopped one within a quarter timeout of ours (grpc_keepalive.h), and
  // half a timeout more covers a keepalive timer that runs late on a loaded machine.
  const double grace = local.code() == StatusCode::kDeadlineExceeded
                           ? config_.timeout_seconds * 3 / 4
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
    wait(until);
  }
}

}  // namespace kolo
