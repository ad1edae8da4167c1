// Step detection and the plot window; see plot_window.h.
#include "tools/timeline/plot_window.h"

#include <algorithm>
#include <cstdio>

namespace kolo::timeline {
namespace {

constexpr size_t kRecentGaps = 64;
constexpr double kStepGapFraction = 0.5;
constexpr double kMarginFraction = 0.02;
constexpr double kDefaultLastMs = 200;

std::string MsText(double ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", ms);
  return buffer;
}

PlotWindow LastMilliseconds(const TraceModel& model, double last_ms) {
  PlotWindow window;
  window.end_us = model.end_us;
  window.begin_us = std::max(model.begin_us, model.end_us - last_ms * 1000.0);
  window.what = "last " + MsText(last_ms) + " ms";
  return window;
}

}  // namespace

std::vector<Interval> FindSteps(const TraceModel& model) {
  std::vector<Interval> spans;
  for (const OpSpan& op : model.ops) spans.push_back({op.begin_us, op.end_us});
  const std::vector<Interval> busy = UnionOf(std::move(spans));
  if (busy.size() < 2) return busy;
  double threshold = 0;
  const size_t first_recent = busy.size() > kRecentGaps ? busy.size() - kRecentGaps : 1;
  for (size_t i = first_recent; i < busy.size(); ++i) {
    threshold = std::max(threshold, busy[i].begin_us - busy[i - 1].end_us);
  }
  threshold *= kStepGapFraction;
  std::vector<Interval> steps{busy.front()};
  for (size_t i = 1; i < busy.size(); ++i) {
    if (busy[i].begin_us - steps.back().end_us >= threshold) {
      steps.push_back(busy[i]);
    } else {
      steps.back().end_us = busy[i].end_us;
    }
  }
  return steps;
}

PlotWindow ChoosePlotWindow(const TraceModel& model, const PlotWindowOptions& options) {
  PlotWindow window;
  const std::vector<Interval> steps =
      options.last_ms > 0 ? std::vector<Interval>{} : FindSteps(model);
  if (options.last_ms > 0) {
    window = LastMilliseconds(model, options.last_ms);
  } else if (steps.empty()) {
    window = LastMilliseconds(model, kDefaultLastMs);
  } else {
    const size_t shown = std::min(steps.size(), static_cast<size_t>(std::max(options.steps, 1)));
    window.begin_us = steps[steps.size() - shown].begin_us;
    window.end_us = steps.back().end_us;
    const double margin = (window.end_us - window.begin_us) * kMarginFraction;
    window.begin_us -= margin;
    window.end_us += margin;
    window.what = "last " + std::to_string(shown) + " of " + std::to_string(steps.size()) +
                  (steps.size() == 1 ? " step" : " steps");
  }
  if (window.end_us <= window.begin_us) window.end_us = window.begin_us + 1000.0;
  return window;
}

}  // namespace kolo::timeline
