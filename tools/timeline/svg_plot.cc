// SVG rendering of the plot; see svg_plot.h.
#include "tools/timeline/svg_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <vector>

namespace kolo::timeline {
namespace {

// Layout, in px.
constexpr double kWidth = 1200;
constexpr double kLeft = 90;  // room for "rank 12"
constexpr double kRight = 24;
constexpr double kTop = 58;
constexpr double kRowHeight = 36;
constexpr double kRowGap = 6;
constexpr double kMinBarWidth = 0.6;  // keeps microsecond spans visible in a 100 ms window

// What a row shows; the order is the drawing order.
enum Bar { kWait, kCopies, kTransfer, kCallback, kOtherWork, kNumBars };
constexpr std::array<const char*, kNumBars> kBarColors = {"#f2b632", "#4f9bd9", "#2f9e57",
                                                          "#9467bd", "#7f7f7f"};
constexpr std::array<const char*, kNumBars> kBarClasses = {"wait", "copy", "transfer", "callback",
                                                           "other"};
constexpr const char* kIdleColor = "#ececec";
constexpr const char* kStragglerColor = "#d62728";

std::string Num(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f", value);
  return buffer;
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        // Control characters are not allowed in XML 1.0; tensor names should not have them.
        out += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
    }
  }
  return out;
}

Bar BarOf(Phase phase) {
  switch (phase) {
    case Phase::kQueue:
      return kWait;
    case Phase::kCopyIn:
    case Phase::kCopyOut:
      return kCopies;
    case Phase::kTransfer:
      return kTransfer;
    case Phase::kCallback:
      return kCallback;
    case Phase::kOther:
      return kOtherWork;
  }
  return kTransfer;
}

class SvgPlot {
 public:
  SvgPlot(const TraceModel& model, const PlotWindow& window) : model_(model), window_(window) {}
  std::string Render();

 private:
  double X(double ts_us) const {
    const double clamped = std::clamp(ts_us, window_.begin_us, window_.end_us);
    return kLeft + (clamped - window_.begin_us) / (window_.end_us - window_.begin_us) *
                       (kWidth - kLeft - kRight);
  }
  double RowTop(size_t index) const {
    return kTop + static_cast<double>(index) * (kRowHeight + kRowGap);
  }
  double RowsBottom() const { return RowTop(model_.ranks.size()) - kRowGap; }
  void CollectBars();
  void RenderTitle();
  void RenderRow(size_t index);
  void RenderStragglers(int rank, double top);
  void RenderAxis();
  void RenderLegend(double y);

  const TraceModel& model_;
  const PlotWindow& window_;
  std::map<int, std::array<std::vector<Interval>, kNumBars>> bars_;  // rank -> unions
  std::string svg_;
};

void SvgPlot::CollectBars() {
  for (const PhaseSpan& span : model_.phases) {
    if (span.end_us < window_.begin_us || span.begin_us > window_.end_us) continue;
    bars_[span.rank][BarOf(span.phase)].push_back({span.begin_us, span.end_us});
  }
  for (auto& [rank, lanes] : bars_) {
    for (auto& intervals : lanes) intervals = UnionOf(std::move(intervals));
  }
}

void SvgPlot::RenderTitle() {
  std::string ranks = model_.ranks.empty() ? "none" : std::to_string(model_.ranks.front().rank);
  if (model_.ranks.size() > 1) ranks += "-" + std::to_string(model_.ranks.back().rank);
  svg_ += "<text x=\"" + Num(kLeft) + "\" y=\"22\" font-size=\"16\" font-weight=\"bold\">" +
          XmlEscape("kolo timeline: ranks " + ranks + ", " + window_.what) + "</text>\n";
  svg_ += "<text x=\"" + Num(kLeft) + "\" y=\"40\" font-size=\"12\" fill=\"#555555\">" +
          XmlEscape(
              "upper lane: negotiation wait (QUEUE); lower lane: copies, transfer, callback, "
              "other work; light grey: idle; red mark: the last rank to announce a tensor") +
          "</text>\n";
}

void SvgPlot::RenderStragglers(int rank, double top) {
  for (const Negotiation& negotiation : model_.negotiations) {
    if (negotiation.last_rank != rank || negotiation.end_us < window_.begin_us ||
        negotiation.end_us > window_.end_us) {
      continue;
    }
    const std::string x = Num(X(negotiation.end_us));
    const double x_value = X(negotiation.end_us);
    svg_ += "<g class=\"straggler\"><title>" +
            XmlEscape(negotiation.tensor + " (" + negotiation.op + "): rank " +
                      std::to_string(rank) + " announced last, after " +
                      Num(negotiation.wait_us() / 1000.0) + " ms of negotiation") +
            "</title><line x1=\"" + x + "\" y1=\"" + Num(top) + "\" x2=\"" + x + "\" y2=\"" +
            Num(top + kRowHeight) + "\" stroke=\"" + kStragglerColor +
            "\" stroke-width=\"1.5\"/><path d=\"M" + Num(x_value - 4) + "," + Num(top - 5) + " L" +
            Num(x_value + 4) + "," + Num(top - 5) + " L" + x + "," + Num(top + 1) + " Z\" fill=\"" +
            kStragglerColor + "\"/></g>\n";
  }
}

void SvgPlot::RenderRow(size_t index) {
  const int rank = model_.ranks[index].rank;
  const double top = RowTop(index);
  svg_ += "<g id=\"rank-" + std::to_string(rank) + "\" class=\"row\">\n";
  svg_ += "<text x=\"12\" y=\"" + Num(top + kRowHeight / 2 + 4) + "\" font-size=\"13\">rank " +
          std::to_string(rank) + "</text>\n";
  svg_ += "<rect class=\"idle\" x=\"" + Num(kLeft) + "\" y=\"" + Num(top) + "\" width=\"" +
          Num(kWidth - kLeft - kRight) + "\" height=\"" + Num(kRowHeight) + "\" fill=\"" +
          kIdleColor + "\"/>\n";
  for (int bar = 0; bar < kNumBars; ++bar) {
    const double y = bar == kWait ? top + 3 : top + 15;
    const double height = bar == kWait ? 10 : 18;
    for (const Interval& interval : bars_[rank][bar]) {
      const double x = X(interval.begin_us);
      const double width = std::max(X(interval.end_us) - x, kMinBarWidth);
      svg_ += "<rect class=\"" + std::string(kBarClasses[bar]) + "\" x=\"" + Num(x) + "\" y=\"" +
              Num(y) + "\" width=\"" + Num(width) + "\" height=\"" + Num(height) + "\" fill=\"" +
              kBarColors[bar] + "\"/>\n";
    }
  }
  RenderStragglers(rank, top);
  svg_ += "</g>\n";
}

// Ticks every 1, 2 or 5 x 10^k ms, about eight of them, labelled in ms since the trace start.
void SvgPlot::RenderAxis() {
  const double span_ms = (window_.end_us - window_.begin_us) / 1000.0;
  const double raw = span_ms / 8;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10) * magnitude;
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  const double axis_y = RowsBottom() + 6;
  svg_ += "<g class=\"axis\" font-size=\"11\" text-anchor=\"middle\">\n";
  svg_ += "<line x1=\"" + Num(kLeft) + "\" y1=\"" + Num(axis_y) + "\" x2=\"" +
          Num(kWidth - kRight) + "\" y2=\"" + Num(axis_y) + "\" stroke=\"#333333\"/>\n";
  // Counting ticks in integers keeps 0.1 + 0.1 + ... from drifting past the last label.
  const int64_t first = static_cast<int64_t>(std::ceil(window_.begin_us / 1000.0 / step - 1e-9));
  const int64_t last = static_cast<int64_t>(std::floor(window_.end_us / 1000.0 / step + 1e-9));
  for (int64_t tick = first; tick <= last; ++tick) {
    const double ms = static_cast<double>(tick) * step;
    const std::string x = Num(X(ms * 1000.0));
    char label[32];
    std::snprintf(label, sizeof(label), "%.*f", decimals, ms);
    svg_ += "<line x1=\"" + x + "\" y1=\"" + Num(kTop) + "\" x2=\"" + x + "\" y2=\"" +
            Num(axis_y + 4) + "\" stroke=\"#000000\" stroke-opacity=\"0.15\"/>\n";
    svg_ += "<text x=\"" + x + "\" y=\"" + Num(axis_y + 17) + "\">" + label + "</text>\n";
  }
  svg_ += "<text x=\"" + Num((kLeft + kWidth - kRight) / 2) + "\" y=\"" + Num(axis_y + 33) +
          "\">ms since the trace start</text>\n</g>\n";
}

void SvgPlot::RenderLegend(double y) {
  const std::array<std::pair<const char*, const char*>, 7> items = {{
      {kBarColors[kWait], "negotiation wait (QUEUE)"},
      {kBarColors[kCopies], "fusion buffer copies"},
      {kBarColors[kTransfer], "transfer"},
      {kBarColors[kCallback], "callback"},
      {kBarColors[kOtherWork], "other work"},
      {kIdleColor, "idle"},
      {kStragglerColor, "last rank to announce"},
  }};
  svg_ += "<g class=\"legend\" font-size=\"12\">\n";
  double x = kLeft;
  for (const auto& [color, label] : items) {
    svg_ += "<rect x=\"" + Num(x) + "\" y=\"" + Num(y - 10) +
            "\" width=\"12\" height=\"12\" "
            "fill=\"" +
            color + "\" stroke=\"#999999\" stroke-width=\"0.5\"/>\n";
    svg_ += "<text x=\"" + Num(x + 17) + "\" y=\"" + Num(y) + "\">" + label + "</text>\n";
    x += 28 + 7.0 * static_cast<double>(std::char_traits<char>::length(label));
  }
  svg_ += "</g>\n";
}

std::string SvgPlot::Render() {
  CollectBars();
  const double legend_y = RowsBottom() + 66;
  const double height = legend_y + 16;
  svg_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + Num(kWidth) +
          "\" height=\"" + Num(height) + "\" viewBox=\"0 0 " + Num(kWidth) + " " + Num(height) +
          "\" font-family=\"sans-serif\">\n";
  svg_ += "<rect x=\"0\" y=\"0\" width=\"" + Num(kWidth) + "\" height=\"" + Num(height) +
          "\" fill=\"#ffffff\"/>\n";
  RenderTitle();
  for (size_t i = 0; i < model_.ranks.size(); ++i) RenderRow(i);
  RenderAxis();
  RenderLegend(legend_y);
  svg_ += "</svg>\n";
  return std::move(svg_);
}

}  // namespace

std::string RenderPlotSvg(const TraceModel& model, const PlotWindow& window) {
  return SvgPlot(model, window).Render();
}

}  // namespace kolo::timeline
