// Reading kolo trace files (docs/TIMELINE.md): the JSON array of events, tolerant of what a
// killed writer leaves behind (no closing ']', a trailing comma, one truncated last line),
// and the typed view of one event that summary and plot work on.
// Called by trace_set.cc and trace_merge.cc. Pure functions; no shared state.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kolo/status.h"
#include "tools/timeline/json_value.h"

namespace kolo::timeline {

// The controller's pseudo-process in a trace (its negotiation tracks), as in core/trace_sink.h.
constexpr int64_t kControllerPid = 1000000;

// One trace event, typed. Fields a phase does not use keep their defaults.
struct Event {
  char phase = 0;   // first char of "ph": 'B', 'E', 'X', 'i', 'M', ...
  int64_t pid = 0;  // rank, or kControllerPid
  bool has_tid = false;
  int64_t tid = 0;    // the track; unique per file after trace_set renumbers it
  double ts_us = 0;   // microseconds since the trace start (shared axis once merged)
  double dur_us = 0;  // 'X' only
  char scope = 't';   // 'i' only: 't' track, 'p' process, 'g' global
  std::string name;   // "" when absent (allowed on 'E')
  JsonValue args;     // null or an object
  int line = 0;       // line in its file, for messages
};

// Called once per event, in file order, with the event object and its 1-based line.
// A non-OK status stops the reading and is returned as is.
using EventVisitor = std::function<Status(JsonValue event, int line)>;

// Reads the trace array in `text`. `file_name` prefixes every message ("a.json:3:7: ...").
// Tolerated, each with a line in `warnings`: a missing closing ']' and an unparseable last
// line (dropped). Anything else that is not a JSON array of objects is an error.
Status ReadTraceArray(std::string_view text, const std::string& file_name,
                      const EventVisitor& visit, std::vector<std::string>* warnings);

// Checks and types one event object. Errors name `file_name` and `line`.
StatusOr<Event> ParseEvent(const JsonValue& object, const std::string& file_name, int line);

// Reads a whole file. Errors name the path and the reason (errno text).
StatusOr<std::string> ReadFileText(const std::string& path);

// Integer-valued number member `key` of `object`, if present and whole.
bool GetInt(const JsonValue& object, std::string_view key, int64_t* out);
// Number member `key` of `object`, if present.
bool GetNumber(const JsonValue& object, std::string_view key, double* out);
// String member `key` of `object`, or "" when absent or not a string.
std::string GetString(const JsonValue& object, std::string_view key);

}  // namespace kolo::timeline
