// Which part of a run `kolo-timeline plot` draws: the last few training steps (found from
// the idle gaps between bursts of op spans) or the last N ms. Pure functions over a
// TraceModel; called by timeline_commands.cc and tests.
#pragma once

#include <string>
#include <vector>

#include "tools/timeline/trace_model.h"

namespace kolo::timeline {

struct PlotWindowOptions {
  double last_ms = 0;  // > 0: the last `last_ms` ms of the trace; steps are not looked for
  int steps = 3;       // otherwise: the last `steps` steps
};

struct PlotWindow {
  double begin_us = 0;
  double end_us = 0;  // > begin_us
  std::string what;   // "last 3 of 12 steps", "last 200 ms", for the title
};

// Steps: the union of all ranks' op spans, split at idle gaps of at least half the longest
// gap among the last 64. Training alternates compute (no op in flight on any rank) with
// bursts of allreduces, so those gaps are the step boundaries; the gaps inside a burst,
// between one tensor's callback and the next enqueue, are much shorter. Looking only at the
// recent gaps keeps a long pause at start-up from merging everything after it into one step.
std::vector<Interval> FindSteps(const TraceModel& model);

// The window to draw, with 2% margins around the steps. A trace without op spans gets its
// last `last_ms` (or 200) ms; an empty one a 1 ms window at 0.
PlotWindow ChoosePlotWindow(const TraceModel& model, const PlotWindowOptions& options);

}  // namespace kolo::timeline
