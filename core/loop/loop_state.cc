#include "core/loop/loop_state.h"

namespace kolo {

const char* LoopStateName(LoopState state) {
  switch (state) {
    case LoopState::kRunning:
      return "running";
    case LoopState::kStopRequested:
      return "stop requested";
    case LoopState::kDraining:
      return "draining";
    case LoopState::kFinishing:
      return "finishing";
    case LoopState::kAborted:
      return "aborted";
    case LoopState::kDone:
      return "done";
  }
  return "unknown";
}

bool LoopTransitionAllowed(LoopState from, LoopState to) {
  using S = LoopState;
  if (to == S::kAborted) return Serving(from);
  switch (from) {
    case S::kRunning:
      return to == S::kStopRequested;
    case S::kStopRequested:
      return to == S::kDraining;
    case S::kDraining:
      return to == S::kFinishing || to == S::kDone;
    case S::kFinishing:
      return to == S::kDone;
    case S::kAborted:
      return to == S::kDone;
    case S::kDone:
      return false;
  }
  return false;
}

}  // namespace kolo
