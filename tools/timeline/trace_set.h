// TraceSet: the events of one job, from per-rank files, merged files or a mix, on one time
// axis (each file shifted by its start_unix_us minus the earliest) with track ids renumbered
// so that no two tracks share a tid. Also the pieces `merge` shares: FileHeader, AlignFiles,
// TidMapper. Called by the kolo-timeline commands and tests; single-threaded, no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kolo/status.h"
#include "tools/timeline/trace_reader.h"

namespace kolo::timeline {

// What a `kolo_trace` (and the matching `kolo_trace_end`) metadata event says about a rank.
struct RankInfo {
  int rank = 0;
  int size = 0;                // the job's world size
  double start_unix_us = 0;    // wall clock at ts = 0 of this rank's events
  std::string file;            // where it came from
  int64_t dropped_events = 0;  // from kolo_trace_end
  bool truncated = false;      // kolo_trace_end says KOLO_TIMELINE_MAX_MB was reached
};

// The kolo_trace headers of one file, collected while its events are read. A per-rank file
// has one; a merged file has one per rank, all with the same start_unix_us.
class FileHeader {
 public:
  explicit FileHeader(std::string file_name) : file_name_(std::move(file_name)) {}

  // Records `event` if it is kolo_trace or kolo_trace_end; ignores other events.
  Status Observe(const Event& event);
  // Call after the last event: fails when the file had no kolo_trace.
  Status Finish() const;

  const std::string& file_name() const { return file_name_; }
  // The file's ts = 0 on the controller's wall clock: its own start corrected by the last
  // kolo_clock offset it recorded (0 without one, as in merged files).
  double start_unix_us() const { return start_unix_us_ + clock_offset_us_; }
  const std::vector<RankInfo>& ranks() const { return ranks_; }

 private:
  std::string file_name_;
  double start_unix_us_ = 0;
  double clock_offset_us_ = 0;
  std::vector<RankInfo> ranks_;
};

// How the files of one job line up: per file, the microseconds added to its ts.
struct FileAlignment {
  double start_unix_us = 0;           // the earliest start: ts = 0 of the combined axis
  std::vector<double> shift_us;       // per file, in the order given
  std::vector<RankInfo> ranks;        // all files, sorted by rank
  std::vector<std::string> warnings;  // dropped events, truncation, missing ranks
};

// Fails when two files hold the same rank.
StatusOr<FileAlignment> AlignFiles(const std::vector<FileHeader>& headers);

// ts + shift, rounded to the nanosecond so that sums like 12.345 + 250 print as 262.345.
double ShiftTimestamp(double ts_us, double shift_us);

// New tids for (file, pid, old tid): 1, 2, ... in order of first use, unique across all
// files and pids (never 0: some Perfetto versions merged the tracks of tid 0 and tid 1).
class TidMapper {
 public:
  int64_t Map(size_t file_index, int64_t pid, int64_t tid);

 private:
  std::map<std::tuple<size_t, int64_t, int64_t>, int64_t> tids_;
  int64_t next_tid_ = 1;
};

struct TraceSet {
  std::vector<RankInfo> ranks;        // sorted by rank
  std::vector<Event> events;          // file after file, each in file order; aligned
  std::vector<std::string> warnings;  // for the user; the data is usable despite them
};

// Reads the files and aligns them. Errors name the file (and line) that is wrong.
StatusOr<TraceSet> LoadTraceSet(const std::vector<std::string>& paths);

// The same for texts already in memory: pairs of (name used in messages, file text).
StatusOr<TraceSet> LoadTraceSetFromTexts(
    const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace kolo::timeline
