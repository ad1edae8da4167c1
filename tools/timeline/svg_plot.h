// The Gantt chart of `kolo-timeline plot`: one row per rank over a window of the run, with
// the negotiation wait (QUEUE) in an upper lane, copies / transfer / callback in a lower lane,
// idle as the background, and a red mark on the row of the last rank to announce each
// negotiation. Plain SVG 1.1: no scripts, no external fonts or files; opens in any browser.
// Pure function; called by timeline_commands.cc and tests.
#pragma once

#include <string>

#include "tools/timeline/plot_window.h"
#include "tools/timeline/trace_model.h"

namespace kolo::timeline {

// The whole SVG document. Each rank's row is a <g id="rank-N" class="row"> holding its bars
// and its straggler marks (<g class="straggler"> with a <title> tooltip naming the tensor).
std::string RenderPlotSvg(const TraceModel& model, const PlotWindow& window);

}  // namespace kolo::timeline
