// TimelineOptions: kolo-timeline's command line, `kolo-timeline COMMAND [options] FILES...`
// with COMMAND one of merge, summary, plot. ParseTimelineOptions is a pure function (no I/O,
// no exit) so that tests can drive it; timeline_commands.cc prints the texts and errors.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::timeline {

enum class Command { kNone, kMerge, kSummary, kPlot };

struct TimelineOptions {
  Command command = Command::kNone;  // kNone only with show_help (the overview)
  bool show_help = false;            // print UsageText(command) and exit 0
  std::vector<std::string> files;    // trace files, per-rank or merged, in the order given
  std::string output;                // -o: merge and plot; "-" is stdout
  bool json = false;                 // summary --json
  double last_ms = 0;                // plot --last-ms N (> 0), else steps
  int steps = 3;                     // plot --steps K
};

// Parses the arguments after argv[0]. Options may come before, between or after the files;
// "--" ends them. Fails with kInvalidArgument and a message naming the bad argument.
StatusOr<TimelineOptions> ParseTimelineOptions(const std::vector<std::string>& args);

// The --help text of `command`; kNone gives the overview of all commands.
std::string UsageText(Command command);

// "merge", "summary", "plot" ("kolo-timeline" for kNone).
const char* CommandName(Command command);

}  // namespace kolo::timeline
