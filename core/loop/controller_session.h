// ControllerSession: a rank's side of its control stream, for the background loop
// (core/loop/background_loop.h). It sends (requests, the stop notice, the abort notice),
// keeps the stream alive, measures the wall clock's offset from the controller's with a few
// Ping/Pong round trips (timeline alignment across hosts), receives, and, when a collective
// failed here, waits a bounded time for the controller's verdict, which may name the real
// culprit (RootCause). A failure of the stream itself is "controller lost".
//
// Threading: not thread-safe; the thread that does the loop's work (under
// BackgroundLoop::loop_mu_). The channel and the clock must outlive it.
#pragma once

#include <functional>
#include <optional>

#include "core/clock.h"
#include "core/control_channel.h"
#include "core/messages.h"
#include "kolo/status.h"

namespace kolo {

class ControllerSession {
 public:
  struct Config {
    // KOLO_TIMEOUT_SECONDS: a keepalive every quarter of it; RootCause's waits.
    double timeout_seconds = 0;
    // Told the best estimate so far of (controller wall clock - this rank's wall clock) and
    // the round trip it was measured with, in µs. Null: no clock pings.
    std::function<void(double offset_us, double rtt_us)> on_clock_offset;
  };

  ControllerSession(Config config, ControlChannel* channel, const Clock* clock);

  // Sends `message`. A failure is the stream's: "controller lost: ...".
  Status Send(const WorkerMessage& message);
  // This rank called shutdown(): the notice (Send's errors).
  Status SendStopNotice();
  // Tells the controller the job aborted with `why`. Best effort: the stream may be what
  // failed, and the controller then learns of it from the stream's end.
  void SendAbortNotice(const Status& why);
  // The next message the controller sent, nullopt if none is waiting; a broken stream is
  // "controller lost: ...".
  StatusOr<std::optional<ControllerMessage>> TryReceive();

  // Clock sync: a ping whose Pong gives one sample (best effort; nothing without
  // on_clock_offset). The sample with the shortest round trip gives the offset.
  void SendClockPing();
  // Takes the Pong's sample; true while another ping is due (a few in all).
  bool TakePong(const ControllerMessage& pong);
  // A keepalive Ping when a quarter of the timeout passed since the last: the controller
  // tells a rank that fell silent before its stream closed (stopped) from one that died
  // (closed at once). Best effort.
  void KeepAlive();

  // The root cause of a collective that failed here with `local`: the controller's Abort (the
  // lost rank named) or the stream breaking (the controller lost), if either comes within
  // min(timeout / 4, 1 s) of the clock when a peer closed its connection (a dead peer's control
  // stream closes at once too), or 3/4 of the timeout when the exchange timed out (in a ring, the
  // peer that sent nothing may itself wait for a stopped rank, which keepalives name); else
  // `local`. Other messages are dropped (nothing runs after a failed collective). Between
  // looks it calls `wait(until)`, which returns at `until` at the latest.
  Status RootCause(const Status& local, const std::function<void(Clock::TimePoint until)>& wait);

 private:
  const Config config_;
  ControlChannel* const channel_;
  const Clock* const clock_;

  Clock::TimePoint last_keepalive_;
  int clock_samples_ = 0;
  double best_clock_rtt_us_ = 0;
};

}  // namespace kolo
