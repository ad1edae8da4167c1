// The tolerant trace-array reader and the event typing; see trace_reader.h.
#include "tools/timeline/trace_reader.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tools/timeline/json_reader.h"

namespace kolo::timeline {
namespace {

void SkipSpace(std::string_view text, size_t* pos) {
  while (*pos < text.size() &&
         (text[*pos] == ' ' || text[*pos] == '\t' || text[*pos] == '\n' || text[*pos] == '\r')) {
    ++*pos;
  }
}

std::string DescribeAt(std::string_view text, size_t pos) {
  return DescribeByteAt(text, pos, "the end of the file");
}

Status ErrorAt(const std::string& file_name, std::string_view text, size_t pos,
               const std::string& what) {
  return InvalidArgument(file_name + ":" + TextPosition(text, pos) + ": " + what);
}

// True when nothing but whitespace follows the line that `start` is on: the element there is
// the file's last line, the only one a killed writer can leave incomplete.
bool IsOnLastLine(std::string_view text, size_t start) {
  const size_t newline = text.find('\n', start);
  if (newline == std::string_view::npos) return true;
  for (size_t i = newline; i < text.size(); ++i) {
    if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r') return false;
  }
  return true;
}

// Line numbers of increasing offsets in one pass over the text.
class LineCounter {
 public:
  explicit LineCounter(std::string_view text) : text_(text) {}
  int LineOf(size_t offset) {
    for (; scanned_ < offset && scanned_ < text_.size(); ++scanned_) {
      if (text_[scanned_] == '\n') ++line_;
    }
    return line_;
  }

 private:
  std::string_view text_;
  size_t scanned_ = 0;
  int line_ = 1;
};

Status ExpectNothingAfter(std::string_view text, size_t pos, const std::string& file_name) {
  SkipSpace(text, &pos);
  if (pos == text.size()) return Status::Ok();
  return ErrorAt(file_name, text, pos,
                 "unexpected " + DescribeAt(text, pos) + " after the closing ']'");
}

}  // namespace

Status ReadTraceArray(std::string_view text, const std::string& file_name,
                      const EventVisitor& visit, std::vector<std::string>* warnings) {
  size_t pos = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;  // tolerate a UTF-8 BOM
  SkipSpace(text, &pos);
  if (pos >= text.size() || text[pos] != '[') {
    return ErrorAt(
        file_name, text, pos,
        "expected '[' (a kolo trace is a JSON array of events), found " + DescribeAt(text, pos));
  }
  ++pos;
  LineCounter lines(text);
  while (true) {
    SkipSpace(text, &pos);
    if (pos >= text.size()) {
      warnings->push_back(file_name +
                          ": no closing ']' (the writer did not stop cleanly); read to the end");
      return Status::Ok();
    }
    if (text[pos] == ']') return ExpectNothingAfter(text, pos + 1, file_name);
    const size_t start = pos;
    StatusOr<JsonValue> event = ParseJsonValueAt(text, &pos);
    if (!event.ok()) {
      if (!IsOnLastLine(text, start))
        return InvalidArgument(file_name + ":" + event.status().message());
      warnings->push_back(file_name + ":" + std::to_string(lines.LineOf(start)) +
                          ": dropped the truncated last line (" + event.status().message() +
                          "); the writer was killed mid-line");
      return Status::Ok();
    }
    if (!event->is_object()) {
      return ErrorAt(
          file_name, text, start,
          std::string("expected an event object, found a ") + JsonTypeName(event->type()));
    }
    KOLO_RETURN_IF_ERROR(visit(std::move(event).value(), lines.LineOf(start)));
    SkipSpace(text, &pos);
    if (pos < text.size() && text[pos] == ',') {
      ++pos;  // a trailing comma before ']' or the end is allowed
    } else if (pos < text.size() && text[pos] == ']') {
      return ExpectNothingAfter(text, pos + 1, file_name);
    } else if (pos < text.size()) {
      return ErrorAt(file_name, text, pos,
                     "expected ',' or ']' after an event, found " + DescribeAt(text, pos));
    }
  }
}

bool GetNumber(const JsonValue& object, std::string_view key, double* out) {
  const JsonValue* value = object.Find(key);
  if (value == nullptr || !value->is_number()) return false;
  *out = value->as_number();
  return true;
}

bool GetInt(const JsonValue& object, std::string_view key, int64_t* out) {
  double number = 0;
  if (!GetNumber(object, key, &number)) return false;
  if (number != std::trunc(number) || std::fabs(number) > 9.0e15) return false;
  *out = static_cast<int64_t>(number);
  return true;
}

std::string GetString(const JsonValue& object, std::string_view key) {
  const JsonValue* value = object.Find(key);
  return value != nullptr && value->is_string() ? value->as_string() : std::string();
}

StatusOr<Event> ParseEvent(const JsonValue& object, const std::string& file_name, int line) {
  auto error = [&](const std::string& what) {
    return InvalidArgument(file_name + ":" + std::to_string(line) + ": " + what);
  };
  Event event;
  event.line = line;
  const std::string ph = GetString(object, "ph");
  if (ph.empty()) return error("event without a \"ph\" string");
  event.phase = ph[0] == 'I' ? 'i' : ph[0];  // 'I' is the old spelling of an instant
  event.name = GetString(object, "name");
  if (!GetInt(object, "pid", &event.pid)) return error("event without an integer \"pid\"");
  if (object.Find("tid") != nullptr) {
    if (!GetInt(object, "tid", &event.tid)) return error("\"tid\" is not an integer");
    event.has_tid = true;
  }
  if (event.phase != 'M' && !GetNumber(object, "ts", &event.ts_us)) {
    return error("'" + ph + "' event \"" + event.name + "\" without a numeric \"ts\"");
  }
  if (event.phase == 'X' && (!GetNumber(object, "dur", &event.dur_us) || event.dur_us < 0)) {
    return error("'X' event \"" + event.name + "\" without a non-negative \"dur\"");
  }
  const std::string scope = GetString(object, "s");
  if (!scope.empty()) event.scope = scope[0];
  if (const JsonValue* args = object.Find("args")) {
    if (!args->is_object()) return error("\"args\" of \"" + event.name + "\" is not an object");
    event.args = *args;
  }
  return event;
}

StatusOr<std::string> ReadFileText(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  size_t count = 0;
  while ((count = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, count);
  const bool failed = std::ferror(file) != 0;
  const int error = errno;  // fread sets it; e.g. EISDIR for a directory
  std::fclose(file);
  if (failed) return InvalidArgument(path + ": cannot read: " + std::strerror(error));
  return text;
}

}  // namespace kolo::timeline
