// Unit tests of kolo-timeline's input side: the strict JSON reader (values, escapes, errors
// with their line:column) and the trace-array reader's tolerance of a killed writer.
// No files, no processes.
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tools/timeline/json_reader.h"
#include "tools/timeline/json_value.h"
#include "tools/timeline/trace_reader.h"
#include "tools/timeline/trace_set.h"

namespace kolo::timeline {
namespace {

TEST_CASE("ParseJson reads every kind of value and keeps object order", "[tools][timeline]") {
  auto value = ParseJson(R"( {"z":[1,-0.5e2,1.5E+3,0],"a":{"t":true,"f":false,"n":null},"s":""} )");
  REQUIRE(value.ok());
  const JsonValue::Object& object = value->as_object();
  REQUIRE(object.size() == 3);
  CHECK(object[0].first == "z");
  CHECK(object[1].first == "a");
  const JsonValue::Array& numbers = value->Find("z")->as_array();
  CHECK(numbers[0].as_number() == 1);
  CHECK(numbers[1].as_number() == -50);
  CHECK(numbers[2].as_number() == 1500);
  CHECK(value->Find("a")->Find("t")->as_bool());
  CHECK(value->Find("a")->Find("n")->is_null());
  CHECK(value->Find("s")->as_string().empty());
  CHECK(value->Find("missing") == nullptr);
}

TEST_CASE("ParseJson decodes escapes, \\u included, to UTF-8", "[tools][timeline]") {
  auto value = ParseJson(R"("\u00e9\u4E2D\ud83d\ude00 \n\t\"\\\/\b\f\r")");
  REQUIRE(value.ok());
  CHECK(value->as_string() == "\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80 \n\t\"\\/\b\f\r");
  auto raw_utf8 = ParseJson("\"grad/\xC3\xA9\"");  // UTF-8 in the file passes through
  REQUIRE(raw_utf8.ok());
  CHECK(raw_utf8->as_string() == "grad/\xC3\xA9");
}

TEST_CASE("ToJson writes what ParseJson reads back, integers without a fraction",
          "[tools][timeline]") {
  const std::string text =
      R"({"name":"a\"b\\c\n","ts":262.345,"big":1700000000000250,"neg":-3,"x":[true,null,{}]})";
  auto value = ParseJson(text);
  REQUIRE(value.ok());
  CHECK(ToJson(*value) == text);
  CHECK(ToJson(JsonValue(std::string("\x01"))) == "\"\\u0001\"");
  CHECK(ToJson(JsonValue(0.1 + 0.2)) == "0.30000000000000004");  // shortest exact form
}

TEST_CASE("ParseJson rejects invalid JSON and says where", "[tools][timeline]") {
  using Case = std::pair<std::string, std::string>;
  auto [text, message] = GENERATE(values<Case>({
      {"", "1:1: unexpected end of the input, expected a value"},
      {R"({"a":1,})", "1:8: expected a string key in an object, found '}'"},
      {"[1,2,]", "1:6: expected a value, found ']'"},
      {R"({"a" 1})", "1:6: expected ':' after an object key, found '1'"},
      {"[1 2]", "1:4: expected ',' or ']' after an array element, found '2'"},
      {R"({"a":1,"a":2})", "1:8: duplicate key \"a\" in an object"},
      {"\"abc", "1:1: unterminated string"},
      {"01", "1:1: invalid number: leading zeros are not allowed"},
      {"1.", "1:3: invalid number: expected a digit after '.', found the end of the input"},
      {"-", "1:2: invalid number: expected a digit, found the end of the input"},
      {"1e+", "1:4: invalid number: expected a digit in the exponent, found the end of the input"},
      {"1e999", "1:1: number out of range: 1e999"},
      {"NaN", "1:1: expected a value, found 'N'"},
      {"tru", "1:1: invalid literal, expected 'true'"},
      {R"("\x")", "1:2: invalid escape '\\x' in a string"},
      {R"("\u12G4")", "1:2: invalid \\u escape: expected 4 hex digits"},
      {R"("\uD800")", "1:2: high surrogate in a \\u escape without its low surrogate"},
      {R"("\uDC00")", "1:2: unpaired low surrogate in a \\u escape"},
      {"\"a\tb\"", "1:3: unescaped control character byte 0x09 in a string"},
      {"\"\xFF\"", "1:2: invalid UTF-8 (byte 0xff) in a string"},
      {"\"\xED\xA0\x80\"", "1:2: invalid UTF-8 (byte 0xed) in a string"},  // a surrogate
      {"1 2", "1:3: unexpected '2' after the JSON value"},
      {"[\n  1,\n  x]", "3:3: expected a value, found 'x'"},
      {"[\"\xC3\xA9\", x]", "1:7: expected a value, found 'x'"},  // columns count characters
  }));
  auto value = ParseJson(text);
  REQUIRE_FALSE(value.ok());
  CHECK(value.status().code() == StatusCode::kInvalidArgument);
  CHECK(value.status().message() == message);
}

TEST_CASE("ParseJson bounds the nesting depth", "[tools][timeline]") {
  CHECK(ParseJson(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')).ok());
  auto deep = ParseJson(std::string(kMaxJsonDepth + 1, '['));
  REQUIRE_FALSE(deep.ok());
  CHECK(deep.status().message() == "1:257: nesting deeper than 256 levels");
}

// Runs ReadTraceArray over `text` as "t.json", collecting the events' "name"s.
struct ReadResult {
  Status status;
  std::vector<std::string> names;
  std::vector<int> lines;
  std::vector<std::string> warnings;
};
ReadResult Read(const std::string& text) {
  ReadResult result;
  result.status = ReadTraceArray(
      text, "t.json",
      [&](JsonValue event, int line) {
        result.names.push_back(GetString(event, "name"));
        result.lines.push_back(line);
        return Status::Ok();
      },
      &result.warnings);
  return result;
}

TEST_CASE("ReadTraceArray reads a cleanly closed trace", "[tools][timeline]") {
  ReadResult result = Read("[\n{\"name\":\"a\"},\n{\"name\":\"b\"}\n]\n");
  REQUIRE(result.status.ok());
  CHECK(result.names == std::vector<std::string>{"a", "b"});
  CHECK(result.lines == std::vector<int>{2, 3});
  CHECK(result.warnings.empty());
}

TEST_CASE("ReadTraceArray accepts a missing ']' after a trailing comma, with a warning",
          "[tools][timeline]") {
  ReadResult result = Read("[\n{\"name\":\"a\"},\n{\"name\":\"b\"},\n");
  REQUIRE(result.status.ok());
  CHECK(result.names == std::vector<std::string>{"a", "b"});
  REQUIRE(result.warnings.size() == 1);
  CHECK(result.warnings[0] ==
        "t.json: no closing ']' (the writer did not stop cleanly); read to the end");
  // A trailing comma before ']' is accepted too.
  CHECK(Read("[{\"name\":\"a\"},]").status.ok());
}

TEST_CASE("ReadTraceArray drops one truncated last line and says so", "[tools][timeline]") {
  ReadResult result = Read("[\n{\"name\":\"a\"},\n{\"name\":\"b\",\"ar");
  REQUIRE(result.status.ok());
  CHECK(result.names == std::vector<std::string>{"a"});
  REQUIRE(result.warnings.size() == 1);
  CHECK(result.warnings[0] ==
        "t.json:3: dropped the truncated last line (3:13: unterminated string); the writer was "
        "killed mid-line");
}

TEST_CASE("ReadTraceArray rejects damage before the last line, naming file and position",
          "[tools][timeline]") {
  using Case = std::pair<std::string, std::string>;
  auto [text, message] = GENERATE(values<Case>({
      {"[\n{\"name\":\"a\n{\"name\":\"b\"},\n",
       "t.json:2:11: unescaped control character byte 0x0a in a string"},
      {"[\n{\"name\":\"a\"}\n{\"name\":\"b\"}\n]",
       "t.json:3:1: expected ',' or ']' after an event, found '{'"},
      {"[1]", "t.json:1:2: expected an event object, found a number"},
      {"[]\nx", "t.json:2:1: unexpected 'x' after the closing ']'"},
      {"{}", "t.json:1:1: expected '[' (a kolo trace is a JSON array of events), found '{'"},
      {"",
       "t.json:1:1: expected '[' (a kolo trace is a JSON array of events), found the end "
       "of the file"},
  }));
  ReadResult result = Read(text);
  REQUIRE_FALSE(result.status.ok());
  CHECK(result.status.message() == message);
}

TEST_CASE("LoadTraceSetFromTexts names the file and line of a bad event", "[tools][timeline]") {
  const std::string header =
      R"({"name":"kolo_trace","ph":"M","pid":0,"args":{"version":1,"rank":0,"size":1,"start_unix_us":5}})";
  using Case = std::pair<std::string, std::string>;
  auto [text, message] = GENERATE_COPY(values<Case>({
      {"[\n{\"name\":\"x\",\"ph\":\"B\",\"ts\":1}\n]",
       "a.json:2: event without an integer \"pid\""},
      {"[\n" + header + ",\n{\"name\":\"x\",\"ph\":\"X\",\"pid\":0,\"ts\":1}\n]",
       "a.json:3: 'X' event \"x\" without a non-negative \"dur\""},
      {"[\n{\"name\":\"x\",\"ph\":\"B\",\"pid\":0,\"ts\":1}\n]",
       "a.json: no kolo_trace metadata event; not a kolo trace (docs/TIMELINE.md)"},
      {"[\n" + header + ",\n" + header + "\n]", "a.json:3: a second kolo_trace for rank 0"},
  }));
  auto set = LoadTraceSetFromTexts({{"a.json", text}});
  REQUIRE_FALSE(set.ok());
  CHECK(set.status().message() == message);
}

TEST_CASE("LoadTraceSetFromTexts refuses one rank in two files", "[tools][timeline]") {
  const std::string trace =
      R"([{"name":"kolo_trace","ph":"M","pid":0,"args":{"rank":0,"size":2,"start_unix_us":5}}])";
  auto set = LoadTraceSetFromTexts({{"a.json", trace}, {"b.json", trace}});
  REQUIRE_FALSE(set.ok());
  CHECK(set.status().message() ==
        "rank 0 is in both a.json and b.json; pass each rank's trace once");
}

}  // namespace
}  // namespace kolo::timeline
