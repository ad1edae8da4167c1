// Loading and aligning the trace files of one job; see trace_set.h.
#include "tools/timeline/trace_set.h"

#include <algorithm>
#include <cmath>

namespace kolo::timeline {
namespace {

constexpr int64_t kTraceFormatVersion = 1;

Status HeaderError(const std::string& file, const Event& event, const std::string& what) {
  return InvalidArgument(file + ":" + std::to_string(event.line) + ": " + what);
}

// One file's events before alignment, with its header.
struct LoadedFile {
  FileHeader header;
  std::vector<Event> events;
};

StatusOr<LoadedFile> ParseTraceText(const std::string& name, const std::string& text,
                                    std::vector<std::string>* warnings) {
  LoadedFile file{FileHeader(name), {}};
  Status status = ReadTraceArray(
      text, name,
      [&](JsonValue object, int line) -> Status {
        KOLO_ASSIGN_OR_RETURN(Event event, ParseEvent(object, name, line));
        KOLO_RETURN_IF_ERROR(file.header.Observe(event));
        file.events.push_back(std::move(event));
        return Status::Ok();
      },
      warnings);
  KOLO_RETURN_IF_ERROR(status);
  KOLO_RETURN_IF_ERROR(file.header.Finish());
  return file;
}

StatusOr<TraceSet> AlignLoadedFiles(std::vector<LoadedFile> files,
                                    std::vector<std::string> warnings) {
  std::vector<FileHeader> headers;
  for (const LoadedFile& file : files) headers.push_back(file.header);
  KOLO_ASSIGN_OR_RETURN(FileAlignment alignment, AlignFiles(headers));
  TraceSet set;
  set.ranks = alignment.ranks;
  set.warnings = std::move(warnings);
  set.warnings.insert(set.warnings.end(), alignment.warnings.begin(), alignment.warnings.end());
  TidMapper tids;
  for (size_t i = 0; i < files.size(); ++i) {
    for (Event& event : files[i].events) {
      if (event.phase != 'M') event.ts_us = ShiftTimestamp(event.ts_us, alignment.shift_us[i]);
      if (event.has_tid) event.tid = tids.Map(i, event.pid, event.tid);
      set.events.push_back(std::move(event));
    }
  }
  return set;
}

}  // namespace

Status FileHeader::Observe(const Event& event) {
  if (event.phase != 'M') return Status::Ok();
  if (event.name == "kolo_trace") {
    RankInfo info;
    int64_t rank = -1;
    int64_t size = 0;
    int64_t version = 0;
    if (!GetInt(event.args, "rank", &rank) || rank < 0 || !GetInt(event.args, "size", &size) ||
        size <= rank || !GetNumber(event.args, "start_unix_us", &info.start_unix_us)) {
      return HeaderError(file_name_, event,
                         "kolo_trace needs args {rank, size > rank, start_unix_us}");
    }
    if (GetInt(event.args, "version", &version) && version > kTraceFormatVersion) {
      return HeaderError(file_name_, event,
                         "trace format version " + std::to_string(version) +
                             " is newer than this kolo-timeline reads (" +
                             std::to_string(kTraceFormatVersion) + ")");
    }
    if (!ranks_.empty() && info.start_unix_us != start_unix_us_) {
      return HeaderError(file_name_, event,
                         "a second kolo_trace with a different start_unix_us; a merged file "
                         "has one time axis");
    }
    for (const RankInfo& seen : ranks_) {
      if (seen.rank == rank) {
        return HeaderError(file_name_, event,
                           "a second kolo_trace for rank " + std::to_string(rank));
      }
    }
    info.rank = static_cast<int>(rank);
    info.size = static_cast<int>(size);
    info.file = file_name_;
    start_unix_us_ = info.start_unix_us;
    ranks_.push_back(info);
  } else if (event.name == "kolo_clock") {
    GetNumber(event.args, "offset_us", &clock_offset_us_);  // the last estimate is the best
  } else if (event.name == "kolo_trace_end") {
    for (RankInfo& info : ranks_) {
      if (info.rank != event.pid) continue;
      GetInt(event.args, "dropped_events", &info.dropped_events);
      const JsonValue* truncated = event.args.Find("truncated");
      info.truncated = truncated != nullptr && truncated->is_bool() && truncated->as_bool();
    }
  }
  return Status::Ok();
}

Status FileHeader::Finish() const {
  if (ranks_.empty()) {
    return InvalidArgument(file_name_ +
                           ": no kolo_trace metadata event; not a kolo trace (docs/TIMELINE.md)");
  }
  return Status::Ok();
}

StatusOr<FileAlignment> AlignFiles(const std::vector<FileHeader>& headers) {
  FileAlignment alignment;
  alignment.start_unix_us = headers.empty() ? 0 : headers[0].start_unix_us();
  for (const FileHeader& header : headers) {
    alignment.start_unix_us = std::min(alignment.start_unix_us, header.start_unix_us());
    alignment.ranks.insert(alignment.ranks.end(), header.ranks().begin(), header.ranks().end());
  }
  for (const FileHeader& header : headers) {
    alignment.shift_us.push_back(header.start_unix_us() - alignment.start_unix_us);
  }
  std::stable_sort(alignment.ranks.begin(), alignment.ranks.end(),
                   [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < alignment.ranks.size(); ++i) {
    const RankInfo& a = alignment.ranks[i - 1];
    const RankInfo& b = alignment.ranks[i];
    if (a.rank == b.rank && a.file == b.file) {
      return InvalidArgument(a.file + " is given twice (rank " + std::to_string(a.rank) + ")");
    }
    if (a.rank == b.rank) {
      return InvalidArgument("rank " + std::to_string(a.rank) + " is in both " + a.file + " and " +
                             b.file + "; pass each rank's trace once");
    }
  }
  for (const RankInfo& info : alignment.ranks) {
    const std::string who = "rank " + std::to_string(info.rank) + " (" + info.file + ")";
    if (info.dropped_events > 0) {
      alignment.warnings.push_back(who + " dropped " + std::to_string(info.dropped_events) +
                                   " events (the writer's queue was full); totals are low");
    }
    if (info.truncated) {
      alignment.warnings.push_back(who + " stopped at KOLO_TIMELINE_MAX_MB; the end is missing");
    }
  }
  if (!alignment.ranks.empty() &&
      static_cast<int>(alignment.ranks.size()) < alignment.ranks.front().size) {
    alignment.warnings.push_back("the traces cover " + std::to_string(alignment.ranks.size()) +
                                 " of " + std::to_string(alignment.ranks.front().size) +
                                 " ranks; pass every rank's file for the full picture");
  }
  return alignment;
}

double ShiftTimestamp(double ts_us, double shift_us) {
  return std::round((ts_us + shift_us) * 1000.0) / 1000.0;
}

int64_t TidMapper::Map(size_t file_index, int64_t pid, int64_t tid) {
  auto [it, inserted] = tids_.try_emplace({file_index, pid, tid}, next_tid_);
  if (inserted) ++next_tid_;
  return it->second;
}

StatusOr<TraceSet> LoadTraceSet(const std::vector<std::string>& paths) {
  std::vector<LoadedFile> files;
  std::vector<std::string> warnings;
  for (const std::string& path : paths) {
    KOLO_ASSIGN_OR_RETURN(std::string text, ReadFileText(path));
    KOLO_ASSIGN_OR_RETURN(LoadedFile file, ParseTraceText(path, text, &warnings));
    files.push_back(std::move(file));
  }
  return AlignLoadedFiles(std::move(files), std::move(warnings));
}

StatusOr<TraceSet> LoadTraceSetFromTexts(
    const std::vector<std::pair<std::string, std::string>>& named_texts) {
  std::vector<LoadedFile> files;
  std::vector<std::string> warnings;
  for (const auto& [name, text] : named_texts) {
    KOLO_ASSIGN_OR_RETURN(LoadedFile file, ParseTraceText(name, text, &warnings));
    files.push_back(std::move(file));
  }
  return AlignLoadedFiles(std::move(files), std::move(warnings));
}

}  // namespace kolo::timeline
