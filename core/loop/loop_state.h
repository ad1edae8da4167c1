// LoopState: the life of a rank's background loop (core/loop/background_loop.h), one value where
// there were six flags. The allowed transitions, and what makes each happen:
//
//   kRunning ──Stop() seen──▶ kStopRequested ──notice sent──▶ kDraining
//   kDraining ──job-wide Shutdown (fast path on)──▶ kFinishing ──all agreed work ran──▶ kDone
//   kDraining ──job-wide Shutdown (fast path off) or stop deadline passed──▶ kDone
//   kRunning, kStopRequested, kDraining, kFinishing ──job-fatal error──▶ kAborted
//   kAborted ──Stop() seen──▶ kDone
//
// The controller sends the job-wide Shutdown only after every rank's notice, so it cannot
// reach a rank that has not sent its own (kRunning, kStopRequested); such a message is a
// protocol error. kDone is final: the thread exits, once no op launched asynchronously (device
// work) is in flight.
//
// Threading: a value type; the loop's copy is background thread only.
#pragma once

namespace kolo {

enum class LoopState {
  kRunning,        // serving ops
  kStopRequested,  // shutdown() called: ops already submitted still run; the notice waits
                   // until the fast path has told the peers and holds nothing of this rank's
  kDraining,       // notice sent: running what the controller still sends, until its
                   // job-wide Shutdown or the stop deadline (KOLO_TIMEOUT_SECONDS)
  kFinishing,      // job-wide Shutdown received: running what the rounds decided, then done
  kAborted,        // a job-fatal error failed every op; waiting for Stop()
  kDone,           // the thread ends
};

// "running", "stop requested", ... (for messages).
const char* LoopStateName(LoopState state);

// Whether the loop may go from `from` to `to` (the diagram above).
bool LoopTransitionAllowed(LoopState from, LoopState to);

// Whether the loop still runs ops in `state` (before an abort or the end).
inline bool Serving(LoopState state) {
  return state != LoopState::kAborted && state != LoopState::kDone;
}

}  // namespace kolo
