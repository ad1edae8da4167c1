// merge / summary / plot with their file handling; see timeline_commands.h.
#include "tools/timeline/timeline_commands.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>

#include "tools/timeline/plot_window.h"
#include "tools/timeline/summary.h"
#include "tools/timeline/summary_format.h"
#include "tools/timeline/svg_plot.h"
#include "tools/timeline/trace_merge.h"
#include "tools/timeline/trace_model.h"
#include "tools/timeline/trace_set.h"

namespace kolo::timeline {
namespace {

void PrintWarnings(const std::vector<std::string>& warnings, std::ostream& err) {
  for (const std::string& warning : warnings) err << "kolo-timeline: warning: " << warning << "\n";
}

int Fail(const Status& status, std::ostream& err) {
  err << "kolo-timeline: " << status.message() << "\n";
  return kExitBadInput;
}

// Calls `write` with a stream onto `path` + ".tmp" and renames it to `path` when both the
// writer and the stream succeeded, so that readers never see a half-written file. "-" writes
// to `out` directly.
Status WriteOutput(const std::string& path, std::ostream& out,
                   const std::function<Status(std::ostream&)>& write) {
  if (path == "-") return write(out);
  const std::string temporary = path + ".tmp";
  std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
  if (!file)
    return InvalidArgument(path + ": cannot create " + temporary + ": " + std::strerror(errno));
  Status status = write(file);
  file.close();
  if (status.ok() && !file)
    status = InvalidArgument(path + ": write error: " + std::strerror(errno));
  if (status.ok() && std::rename(temporary.c_str(), path.c_str()) != 0) {
    status = InvalidArgument(path + ": cannot rename " + temporary + ": " + std::strerror(errno));
  }
  if (!status.ok()) std::remove(temporary.c_str());
  return status;
}

int RunMerge(const TimelineOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<std::string> warnings;
  Status status = WriteOutput(options.output, out, [&](std::ostream& stream) {
    return MergeTraceFiles(options.files, stream, &warnings);
  });
  PrintWarnings(warnings, err);
  if (!status.ok()) return Fail(status, err);
  if (options.output != "-") {
    out << "wrote " << options.output << " (" << options.files.size()
        << (options.files.size() == 1 ? " file" : " files") << " merged)\n";
  }
  return kExitOk;
}

int RunSummary(const TimelineOptions& options, std::ostream& out, std::ostream& err) {
  StatusOr<TraceSet> set = LoadTraceSet(options.files);
  if (!set.ok()) return Fail(set.status(), err);
  const Summary summary = Summarize(BuildTraceModel(*set));
  PrintWarnings(summary.warnings, err);
  if (options.json) {
    out << ToJson(SummaryToJson(summary)) << "\n";
  } else {
    out << FormatSummaryText(summary);
  }
  return kExitOk;
}

int RunPlot(const TimelineOptions& options, std::ostream& out, std::ostream& err) {
  StatusOr<TraceSet> set = LoadTraceSet(options.files);
  if (!set.ok()) return Fail(set.status(), err);
  const TraceModel model = BuildTraceModel(*set);
  PrintWarnings(model.warnings, err);
  PlotWindowOptions window_options;
  window_options.last_ms = options.last_ms;
  window_options.steps = options.steps;
  const PlotWindow window = ChoosePlotWindow(model, window_options);
  const std::string svg = RenderPlotSvg(model, window);
  Status status = WriteOutput(options.output, out, [&](std::ostream& stream) {
    stream << svg;
    return Status::Ok();
  });
  if (!status.ok()) return Fail(status, err);
  if (options.output != "-") {
    out << "wrote " << options.output << " (" << model.ranks.size() << " ranks, " << window.what
        << ")\n";
  }
  return kExitOk;
}

}  // namespace

int RunTimelineCommand(const TimelineOptions& options, std::ostream& out, std::ostream& err) {
  if (options.show_help) {
    out << UsageText(options.command);
    return kExitOk;
  }
  switch (options.command) {
    case Command::kMerge:
      return RunMerge(options, out, err);
    case Command::kSummary:
      return RunSummary(options, out, err);
    case Command::kPlot:
      return RunPlot(options, out, err);
    case Command::kNone:
      break;
  }
  out << UsageText(Command::kNone);
  return kExitOk;
}

int TimelineMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  StatusOr<TimelineOptions> options = ParseTimelineOptions(args);
  if (!options.ok()) {
    const Command command = args.empty()           ? Command::kNone
                            : args[0] == "merge"   ? Command::kMerge
                            : args[0] == "summary" ? Command::kSummary
                            : args[0] == "plot"    ? Command::kPlot
                                                   : Command::kNone;
    err << "kolo-timeline: " << options.status().message() << "\nRun 'kolo-timeline"
        << (command == Command::kNone ? "" : std::string(" ") + CommandName(command))
        << " --help' for usage.\n";
    return kExitUsage;
  }
  return RunTimelineCommand(*options, out, err);
}

}  // namespace kolo::timeline
