// The kolo-timeline commands with their I/O: reading the trace files, writing the merged
// trace / the SVG (to a temporary file renamed into place) and printing to out / err.
// Called by main.cc and by tests (which pass string streams). Single-threaded.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tools/timeline/timeline_options.h"

namespace kolo::timeline {

// Process exit codes.
constexpr int kExitOk = 0;
constexpr int kExitBadInput = 1;  // a trace cannot be read or used; the output is not written
constexpr int kExitUsage = 2;     // bad command line

// Runs parsed `options`: results to `out` (the summary; the merged trace or SVG for "-o -")
// and "kolo-timeline: ..." errors and warnings to `err`. Returns kExitOk or kExitBadInput.
int RunTimelineCommand(const TimelineOptions& options, std::ostream& out, std::ostream& err);

// Parses `args` (argv without argv[0]) and runs the command: what main() does.
int TimelineMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace kolo::timeline
