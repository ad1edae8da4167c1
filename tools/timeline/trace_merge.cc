// Two passes over the input files: headers first (alignment), then the rewritten events.
// See trace_merge.h.
#include "tools/timeline/trace_merge.h"

#include "tools/timeline/trace_reader.h"
#include "tools/timeline/trace_set.h"

namespace kolo::timeline {
namespace {

// Pass 1: checks one file completely and collects its kolo_trace headers.
StatusOr<FileHeader> ScanFile(const std::string& path, std::vector<std::string>* warnings) {
  KOLO_ASSIGN_OR_RETURN(std::string text, ReadFileText(path));
  FileHeader header(path);
  KOLO_RETURN_IF_ERROR(ReadTraceArray(
      text, path,
      [&](JsonValue object, int line) -> Status {
        KOLO_ASSIGN_OR_RETURN(Event event, ParseEvent(object, path, line));
        return header.Observe(event);
      },
      warnings));
  KOLO_RETURN_IF_ERROR(header.Finish());
  return header;
}

// Rewrites one event object in place for the merged axis and track numbering.
void RewriteEvent(const Event& event, size_t file_index, double shift_us,
                  const FileAlignment& alignment, TidMapper* tids, JsonValue* object) {
  if (event.phase != 'M') object->Set("ts", ShiftTimestamp(event.ts_us, shift_us));
  if (event.has_tid) {
    object->Set("tid", static_cast<int64_t>(tids->Map(file_index, event.pid, event.tid)));
  }
  if (event.phase == 'M' && event.name == "kolo_trace") {
    JsonValue* args = object->Find("args");
    double previous_shift = 0;
    GetNumber(*args, "merged_shift_us", &previous_shift);
    args->Set("start_unix_us", alignment.start_unix_us);
    args->Set("merged_shift_us", previous_shift + shift_us);
  }
}

// Pass 2: writes the events of one (already checked) file.
Status WriteFile(const std::string& path, size_t file_index, const FileAlignment& alignment,
                 TidMapper* tids, bool* first_event, std::ostream& out) {
  KOLO_ASSIGN_OR_RETURN(std::string text, ReadFileText(path));
  const double shift_us = alignment.shift_us[file_index];
  std::vector<std::string> repeated_warnings;  // already reported by pass 1
  std::string line;
  return ReadTraceArray(
      text, path,
      [&](JsonValue object, int line_number) -> Status {
        KOLO_ASSIGN_OR_RETURN(Event event, ParseEvent(object, path, line_number));
        // Applied through the shift; kept, it would shift a re-merge a second time.
        if (event.phase == 'M' && event.name == "kolo_clock") return Status::Ok();
        RewriteEvent(event, file_index, shift_us, alignment, tids, &object);
        line.assign(*first_event ? "" : ",\n");
        *first_event = false;
        AppendJson(object, &line);
        out << line;
        return Status::Ok();
      },
      &repeated_warnings);
}

}  // namespace

Status MergeTraceFiles(const std::vector<std::string>& paths, std::ostream& out,
                       std::vector<std::string>* warnings) {
  std::vector<FileHeader> headers;
  for (const std::string& path : paths) {
    KOLO_ASSIGN_OR_RETURN(FileHeader header, ScanFile(path, warnings));
    headers.push_back(std::move(header));
  }
  KOLO_ASSIGN_OR_RETURN(FileAlignment alignment, AlignFiles(headers));
  warnings->insert(warnings->end(), alignment.warnings.begin(), alignment.warnings.end());

  out << "[\n";
  TidMapper tids;
  bool first_event = true;
  for (size_t i = 0; i < paths.size(); ++i) {
    Status status = WriteFile(paths[i], i, alignment, &tids, &first_event, out);
    if (!status.ok()) return status.WithContext("the file changed while merging");
  }
  out << "\n]\n";
  if (!out) return InvalidArgument("writing the merged trace failed");
  return Status::Ok();
}

}  // namespace kolo::timeline
