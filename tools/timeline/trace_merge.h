// `kolo-timeline merge`: combines the per-rank trace files of one job (or merged files) into
// one Chrome trace-event JSON array with a closing ']' that Perfetto and chrome://tracing load.
// Called by timeline_commands.cc and tests; single-threaded.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::timeline {

// Writes the merged trace of `paths` to `out`: every event of every file, file after file,
// one per line, members in their original order, with
//   - ts shifted by the file's start_unix_us minus the earliest file's (see TIMELINE.md);
//   - tids renumbered 1, 2, ... so that no two tracks of the output share one (TidMapper);
//   - each kolo_trace event's start_unix_us set to the shared start, and merged_shift_us
//     recording the shift applied, so that merging a merged file again changes nothing.
// Every file is read and checked before the first byte is written; on error (a file that
// cannot be read, is not a kolo trace, or repeats a rank) nothing is written. Files are read
// twice rather than held in memory, so that traces of many ranks can be merged.
// Tolerated damage (missing ']', a truncated last line) and dropped events add `warnings`.
Status MergeTraceFiles(const std::vector<std::string>& paths, std::ostream& out,
                       std::vector<std::string>* warnings);

}  // namespace kolo::timeline
