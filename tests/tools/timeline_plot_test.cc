// Tests of `kolo-timeline plot`: step detection, the window, and the SVG (well-formed, one row
// per rank, straggler marks on the right rows, names escaped). Reads tests/tools/data only.
#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tools/timeline/plot_window.h"
#include "tools/timeline/svg_plot.h"
#include "tools/timeline/trace_model.h"
#include "tools/timeline/trace_set.h"

namespace kolo::timeline {
namespace {

const std::string kPlotRank0 = std::string(KOLO_TIMELINE_TEST_DATA) + "/timeline_small.rank0.json";
const std::string kPlotRank1 = std::string(KOLO_TIMELINE_TEST_DATA) + "/timeline_small.rank1.json";

TraceModel TestTraceModel() {
  auto set = LoadTraceSet({kPlotRank0, kPlotRank1});
  REQUIRE(set.ok());
  return BuildTraceModel(*set);
}

// Where the tag that opens at `lt` ends ('>' outside quotes), or npos.
size_t TagEnd(const std::string& xml, size_t lt) {
  bool quoted = false;
  for (size_t i = lt + 1; i < xml.size(); ++i) {
    if (xml[i] == '"') quoted = !quoted;
    if (xml[i] == '>' && !quoted) return i;
  }
  return std::string::npos;
}

// "" if `xml` is well-formed in the subset an SVG writer needs (an optional <?xml ?>, one root,
// nested tags, quoted attributes, '&' only in entities), else what is wrong.
std::string XmlProblem(const std::string& xml) {
  static const std::regex kEntitiesOk(R"(([^&<]|&(amp|lt|gt|quot|apos);)*)");
  static const std::regex kTag(
      R"([A-Za-z][\w:-]*(\s+[A-Za-z][\w:-]*="([^"&<]|&(amp|lt|gt|quot|apos);)*")*\s*/?)");
  std::vector<std::string> open;
  int roots = 0;
  size_t pos = xml.compare(0, 5, "<?xml") == 0 ? xml.find("?>") + 2 : 0;
  while (pos < xml.size()) {
    const size_t lt = std::min(xml.find('<', pos), xml.size());
    const std::string text = xml.substr(pos, lt - pos);
    if (!std::regex_match(text, kEntitiesOk)) return "bad '&' in text: " + text;
    if (open.empty() && text.find_first_not_of(" \n") != std::string::npos) return "stray text";
    if (lt == xml.size()) break;
    const size_t gt = TagEnd(xml, lt);
    if (gt == std::string::npos) return "unterminated tag";
    const std::string tag = xml.substr(lt + 1, gt - lt - 1);
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched <" + tag + ">";
      open.pop_back();
    } else {
      if (!std::regex_match(tag, kTag)) return "malformed tag <" + tag + ">";
      if (open.empty() && ++roots > 1) return "a second root element";
      if (tag.back() != '/') open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    pos = gt + 1;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return roots == 1 ? "" : "no root element";
}

// The text of rank `rank`'s row group: from its <g id="rank-N"> to the next row or the axis.
std::string Row(const std::string& svg, int rank) {
  const size_t begin = svg.find("<g id=\"rank-" + std::to_string(rank) + "\"");
  if (begin == std::string::npos) return "";
  const size_t next = std::min(svg.find("<g id=\"rank-", begin + 1), svg.find("<g class=\"axis\""));
  return svg.substr(begin, next - begin);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) {
    ++count;
  }
  return count;
}

TEST_CASE("FindSteps splits the test trace at its idle gap", "[tools][timeline]") {
  const std::vector<Interval> steps = FindSteps(TestTraceModel());
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].begin_us == 100);
  CHECK(steps[0].end_us == 700);
  CHECK(steps[1].begin_us == 2000);
  CHECK(steps[1].end_us == 2561);
}

TEST_CASE("FindSteps judges gaps by the recent ones, not a long pause at start-up",
          "[tools][timeline]") {
  TraceModel model;
  model.ops.push_back({0, "warmup", "ALLREDUCE", 0, 1000});
  for (int step = 0; step < 70; ++step) {  // 3 ops 1 ms apart, then 20 ms of compute
    const double base = 1'000'000 + step * 30'000.0;
    for (int op = 0; op < 3; ++op) {
      model.ops.push_back({0, "t" + std::to_string(op), "ALLREDUCE", base + op * 4000.0,
                           base + op * 4000.0 + 3000});
    }
  }
  const std::vector<Interval> steps = FindSteps(model);
  REQUIRE(steps.size() == 71);
  CHECK(steps.back().begin_us == 1'000'000 + 69 * 30'000.0);
  CHECK(steps.back().end_us == 1'000'000 + 69 * 30'000.0 + 11'000);
}

TEST_CASE("ChoosePlotWindow: the last steps with margins, or the last N ms", "[tools][timeline]") {
  const TraceModel model = TestTraceModel();
  PlotWindow window = ChoosePlotWindow(model, {});
  CHECK(window.what == "last 2 of 2 steps");
  CHECK(window.begin_us == Approx(100 - 0.02 * 2461));
  CHECK(window.end_us == Approx(2561 + 0.02 * 2461));
  window = ChoosePlotWindow(model, {0, 1});
  CHECK(window.what == "last 1 of 2 steps");
  CHECK(window.begin_us == Approx(2000 - 0.02 * 561));
  window = ChoosePlotWindow(model, {1.0, 3});
  CHECK(window.what == "last 1 ms");
  CHECK(window.begin_us == 1561);
  CHECK(window.end_us == 2561);
}

TEST_CASE("plot: a well-formed SVG with one row per rank and the stragglers marked",
          "[tools][timeline]") {
  const TraceModel model = TestTraceModel();
  const std::string svg = RenderPlotSvg(model, ChoosePlotWindow(model, {}));
  CHECK(XmlProblem(svg) == "");
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\"") != std::string::npos);
  CHECK(svg.find("<script") == std::string::npos);
  CHECK(svg.find("href") == std::string::npos);  // nothing external
  CHECK(Count(svg, "class=\"row\"") == 2);
  CHECK(Count(svg, "<g id=\"rank-0\"") == 1);
  CHECK(Count(svg, "<g id=\"rank-1\"") == 1);
  CHECK(Count(Row(svg, 0), "class=\"straggler\"") == 1);  // grad/w1 in step 2
  CHECK(Count(Row(svg, 1), "class=\"straggler\"") == 3);
  CHECK(Row(svg, 1).find("grad/b1 (ALLREDUCE): rank 1 announced last") != std::string::npos);
  for (const char* bar : {"wait", "copy", "transfer", "callback", "idle"}) {
    CHECK(Row(svg, 0).find(std::string("class=\"") + bar + "\"") != std::string::npos);
  }
  CHECK(svg.find("last 2 of 2 steps") != std::string::npos);

  const std::string last_ms = RenderPlotSvg(model, ChoosePlotWindow(model, {1.0, 3}));
  CHECK(XmlProblem(last_ms) == "");
  CHECK(Count(Row(last_ms, 0), "class=\"straggler\"") == 1);  // 2100 us
  CHECK(Count(Row(last_ms, 1), "class=\"straggler\"") == 1);  // 2510 us
}

TEST_CASE("plot escapes tensor names and copes with a trace without ops", "[tools][timeline]") {
  TraceModel model;
  model.ranks.push_back(RankInfo{0, 1, 0, "a.json"});
  model.negotiations.push_back({"a<b&\"c\"", "ALLREDUCE", 10, 20, 0});
  model.end_us = 30;
  const PlotWindow window = ChoosePlotWindow(model, {});
  CHECK(window.what == "last 200 ms");
  const std::string svg = RenderPlotSvg(model, window);
  CHECK(XmlProblem(svg) == "");
  CHECK(svg.find("a&lt;b&amp;&quot;c&quot; (ALLREDUCE)") != std::string::npos);
  CHECK(XmlProblem("<svg><g></svg>") == "mismatched </svg>");  // the checker itself works
  CHECK(XmlProblem("<svg a=\"&x\"/>") == "malformed tag <svg a=\"&x\"/>");
}

}  // namespace
}  // namespace kolo::timeline
