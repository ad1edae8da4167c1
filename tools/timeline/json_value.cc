// JsonValue member lookup and the compact JSON writer; see json_value.h.
#include "tools/timeline/json_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kolo::timeline {
namespace {

// Whole numbers below 2^53 are exact in a double and are written without a fraction or an
// exponent (start_unix_us is ~1.7e15 and must stay an integer in the output).
constexpr double kMaxExactInteger = 9007199254740992.0;

}  // namespace

bool operator==(const JsonValue& a, const JsonValue& b) {
  if (a.type_ != b.type_) return false;
  switch (a.type_) {
    case JsonValue::Type::kNull:
      return true;
    case JsonValue::Type::kBool:
      return a.bool_ == b.bool_;
    case JsonValue::Type::kNumber:
      return a.number_ == b.number_;
    case JsonValue::Type::kString:
      return a.string_ == b.string_;
    case JsonValue::Type::kArray:
      return a.array_ == b.array_;
    case JsonValue::Type::kObject:
      return a.object_ == b.object_;
  }
  return false;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const Member& member : as_object()) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

JsonValue* JsonValue::Find(std::string_view key) {
  return const_cast<JsonValue*>(static_cast<const JsonValue*>(this)->Find(key));
}

void JsonValue::Set(std::string_view key, JsonValue value) {
  if (JsonValue* existing = Find(key)) {
    *existing = std::move(value);
    return;
  }
  as_object().emplace_back(std::string(key), std::move(value));
}

const char* JsonTypeName(JsonValue::Type type) {
  switch (type) {
    case JsonValue::Type::kNull:
      return "null";
    case JsonValue::Type::kBool:
      return "boolean";
    case JsonValue::Type::kNumber:
      return "number";
    case JsonValue::Type::kString:
      return "string";
    case JsonValue::Type::kArray:
      return "array";
    case JsonValue::Type::kObject:
      return "object";
  }
  return "unknown";
}

void AppendJsonNumber(double number, std::string* out) {
  if (!std::isfinite(number)) {  // JSON has no infinities; never produced by our own math
    out->append("null");
    return;
  }
  char buffer[64];
  std::to_chars_result result;
  if (number == std::trunc(number) && std::fabs(number) < kMaxExactInteger) {
    result = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<int64_t>(number));
  } else {
    result = std::to_chars(buffer, buffer + sizeof(buffer), number);
  }
  out->append(buffer, result.ptr);
}

void AppendJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(c));
          out->append(escaped);
        } else {
          out->push_back(c);  // UTF-8 passes through unchanged
        }
    }
  }
  out->push_back('"');
}

void AppendJson(const JsonValue& value, std::string* out) {
  switch (value.type()) {
    case JsonValue::Type::kNull:
      out->append("null");
      return;
    case JsonValue::Type::kBool:
      out->append(value.as_bool() ? "true" : "false");
      return;
    case JsonValue::Type::kNumber:
      AppendJsonNumber(value.as_number(), out);
      return;
    case JsonValue::Type::kString:
      AppendJsonString(value.as_string(), out);
      return;
    case JsonValue::Type::kArray: {
      out->push_back('[');
      const char* separator = "";
      for (const JsonValue& element : value.as_array()) {
        out->append(separator);
        AppendJson(element, out);
        separator = ",";
      }
      out->push_back(']');
      return;
    }
    case JsonValue::Type::kObject: {
      out->push_back('{');
      const char* separator = "";
      for (const JsonValue::Member& member : value.as_object()) {
        out->append(separator);
        AppendJsonString(member.first, out);
        out->push_back(':');
        AppendJson(member.second, out);
        separator = ",";
      }
      out->push_back('}');
      return;
    }
  }
}

std::string ToJson(const JsonValue& value) {
  std::string out;
  AppendJson(value, &out);
  return out;
}

}  // namespace kolo::timeline
