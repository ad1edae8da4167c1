// The recursive-descent JSON parser behind ParseJson; see json_reader.h.
#include "tools/timeline/json_reader.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace kolo::timeline {
namespace {

bool IsJsonSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

// Length of the well-formed UTF-8 sequence (2..4 bytes) that starts at text[pos] with a
// non-ASCII byte, or 0 if it is malformed (overlong, surrogate, above U+10FFFF, cut short).
size_t Utf8SequenceLength(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) -> unsigned {
    return pos + i < text.size() ? static_cast<unsigned char>(text[pos + i]) : 0u;
  };
  auto in = [](unsigned b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; };
  const unsigned b0 = byte(0);
  if (in(b0, 0xC2, 0xDF)) return in(byte(1), 0x80, 0xBF) ? 2 : 0;
  if (in(b0, 0xE0, 0xEF)) {
    const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80;
    const unsigned hi = b0 == 0xED ? 0x9F : 0xBF;
    return in(byte(1), lo, hi) && in(byte(2), 0x80, 0xBF) ? 3 : 0;
  }
  if (in(b0, 0xF0, 0xF4)) {
    const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80;
    const unsigned hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return in(byte(1), lo, hi) && in(byte(2), 0x80, 0xBF) && in(byte(3), 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

class Parser {
 public:
  Parser(std::string_view text, size_t pos) : text_(text), pos_(pos) {}

  StatusOr<JsonValue> ParseValue(int depth);
  void SkipSpace() {
    while (pos_ < text_.size() && IsJsonSpace(text_[pos_])) ++pos_;
  }
  size_t pos() const { return pos_; }
  bool AtEnd() const { return pos_ >= text_.size(); }

  Status ErrorAt(size_t offset, const std::string& what) const {
    return InvalidArgument(TextPosition(text_, offset) + ": " + what);
  }
  // "'x'", "byte 0xff" or "the end of the input", for "found ..." messages.
  std::string Describe(size_t offset) const;

 private:
  StatusOr<JsonValue> ParseObject(int depth);
  StatusOr<JsonValue> ParseArray(int depth);
  StatusOr<JsonValue> ParseString();
  StatusOr<JsonValue> ParseNumber();
  StatusOr<JsonValue> ParseLiteral(std::string_view word, JsonValue value);
  // Parses the 4 hex digits of a \u escape at pos_; advances past them.
  std::optional<uint32_t> ParseHex4();
  Status ParseEscape(std::string* out);

  std::string_view text_;
  size_t pos_;
};

std::string Parser::Describe(size_t offset) const {
  return DescribeByteAt(text_, offset, "the end of the input");
}

StatusOr<JsonValue> Parser::ParseValue(int depth) {
  SkipSpace();
  if (AtEnd()) return ErrorAt(pos_, "unexpected end of the input, expected a value");
  switch (text_[pos_]) {
    case '{':
      return ParseObject(depth + 1);
    case '[':
      return ParseArray(depth + 1);
    case '"':
      return ParseString();
    case 't':
      return ParseLiteral("true", JsonValue(true));
    case 'f':
      return ParseLiteral("false", JsonValue(false));
    case 'n':
      return ParseLiteral("null", JsonValue());
    default:
      if (text_[pos_] == '-' || IsDigit(text_[pos_])) return ParseNumber();
      return ErrorAt(pos_, "expected a value, found " + Describe(pos_));
  }
}

StatusOr<JsonValue> Parser::ParseLiteral(std::string_view word, JsonValue value) {
  if (text_.substr(pos_, word.size()) != word) {
    return ErrorAt(pos_, "invalid literal, expected '" + std::string(word) + "'");
  }
  pos_ += word.size();
  return value;
}

StatusOr<JsonValue> Parser::ParseObject(int depth) {
  if (depth > kMaxJsonDepth) {
    return ErrorAt(pos_, "nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  ++pos_;  // '{'
  JsonValue object = JsonValue::EmptyObject();
  SkipSpace();
  if (!AtEnd() && text_[pos_] == '}') {
    ++pos_;
    return object;
  }
  while (true) {
    SkipSpace();
    const size_t key_pos = pos_;
    if (AtEnd() || text_[pos_] != '"') {
      return ErrorAt(pos_, "expected a string key in an object, found " + Describe(pos_));
    }
    KOLO_ASSIGN_OR_RETURN(JsonValue key, ParseString());
    if (object.Find(key.as_string()) != nullptr) {
      return ErrorAt(key_pos, "duplicate key \"" + key.as_string() + "\" in an object");
    }
    SkipSpace();
    if (AtEnd() || text_[pos_] != ':') {
      return ErrorAt(pos_, "expected ':' after an object key, found " + Describe(pos_));
    }
    ++pos_;
    KOLO_ASSIGN_OR_RETURN(JsonValue value, ParseValue(depth));
    object.as_object().emplace_back(key.as_string(), std::move(value));
    SkipSpace();
    if (!AtEnd() && text_[pos_] == ',') {
      ++pos_;
      continue;
    }
    if (!AtEnd() && text_[pos_] == '}') {
      ++pos_;
      return object;
    }
    return ErrorAt(pos_, "expected ',' or '}' after an object member, found " + Describe(pos_));
  }
}

StatusOr<JsonValue> Parser::ParseArray(int depth) {
  if (depth > kMaxJsonDepth) {
    return ErrorAt(pos_, "nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  ++pos_;  // '['
  JsonValue array = JsonValue::EmptyArray();
  SkipSpace();
  if (!AtEnd() && text_[pos_] == ']') {
    ++pos_;
    return array;
  }
  while (true) {
    KOLO_ASSIGN_OR_RETURN(JsonValue element, ParseValue(depth));
    array.Append(std::move(element));
    SkipSpace();
    if (!AtEnd() && text_[pos_] == ',') {
      ++pos_;
      continue;
    }
    if (!AtEnd() && text_[pos_] == ']') {
      ++pos_;
      return array;
    }
    return ErrorAt(pos_, "expected ',' or ']' after an array element, found " + Describe(pos_));
  }
}

std::optional<uint32_t> Parser::ParseHex4() {
  if (pos_ + 4 > text_.size()) return std::nullopt;
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) {
    const int digit = HexDigitValue(text_[pos_ + i]);
    if (digit < 0) return std::nullopt;
    value = value * 16 + static_cast<uint32_t>(digit);
  }
  pos_ += 4;
  return value;
}

// Handles the escape whose backslash is at pos_, appending its UTF-8 to `out`.
Status Parser::ParseEscape(std::string* out) {
  const size_t start = pos_;
  ++pos_;  // '\\'
  if (AtEnd()) return ErrorAt(start, "unterminated string");
  const char c = text_[pos_++];
  // Pairs of (escape letter, the character it stands for).
  static constexpr std::string_view kSimpleEscapes = "\"\"\\\\//b\bf\fn\nr\rt\t";
  for (size_t i = 0; i < kSimpleEscapes.size(); i += 2) {
    if (kSimpleEscapes[i] == c) {
      out->push_back(kSimpleEscapes[i + 1]);
      return Status::Ok();
    }
  }
  if (c != 'u') return ErrorAt(start, "invalid escape '\\" + std::string(1, c) + "' in a string");
  std::optional<uint32_t> unit = ParseHex4();
  if (!unit) return ErrorAt(start, "invalid \\u escape: expected 4 hex digits");
  uint32_t code_point = *unit;
  if (code_point >= 0xDC00 && code_point <= 0xDFFF) {
    return ErrorAt(start, "unpaired low surrogate in a \\u escape");
  }
  if (code_point >= 0xD800 && code_point <= 0xDBFF) {
    if (text_.substr(pos_, 2) != "\\u") {
      return ErrorAt(start, "high surrogate in a \\u escape without its low surrogate");
    }
    pos_ += 2;
    std::optional<uint32_t> low = ParseHex4();
    if (!low || *low < 0xDC00 || *low > 0xDFFF) {
      return ErrorAt(start, "high surrogate in a \\u escape without its low surrogate");
    }
    code_point = 0x10000 + ((code_point - 0xD800) << 10) + (*low - 0xDC00);
  }
  AppendUtf8(code_point, out);
  return Status::Ok();
}

StatusOr<JsonValue> Parser::ParseString() {
  const size_t start = pos_;
  ++pos_;  // '"'
  std::string value;
  while (true) {
    if (AtEnd()) return ErrorAt(start, "unterminated string");
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c == '"') {
      ++pos_;
      return JsonValue(std::move(value));
    }
    if (c == '\\') {
      KOLO_RETURN_IF_ERROR(ParseEscape(&value));
    } else if (c < 0x20) {
      return ErrorAt(pos_, "unescaped control character " + Describe(pos_) + " in a string");
    } else if (c < 0x80) {
      value.push_back(static_cast<char>(c));
      ++pos_;
    } else {
      const size_t length = Utf8SequenceLength(text_, pos_);
      if (length == 0) return ErrorAt(pos_, "invalid UTF-8 (" + Describe(pos_) + ") in a string");
      value.append(text_.substr(pos_, length));
      pos_ += length;
    }
  }
}

StatusOr<JsonValue> Parser::ParseNumber() {
  const size_t start = pos_;
  if (text_[pos_] == '-') ++pos_;
  if (AtEnd() || !IsDigit(text_[pos_])) {
    return ErrorAt(pos_, "invalid number: expected a digit, found " + Describe(pos_));
  }
  if (text_[pos_] == '0' && pos_ + 1 < text_.size() && IsDigit(text_[pos_ + 1])) {
    return ErrorAt(start, "invalid number: leading zeros are not allowed");
  }
  while (!AtEnd() && IsDigit(text_[pos_])) ++pos_;
  if (!AtEnd() && text_[pos_] == '.') {
    ++pos_;
    if (AtEnd() || !IsDigit(text_[pos_])) {
      return ErrorAt(pos_, "invalid number: expected a digit after '.', found " + Describe(pos_));
    }
    while (!AtEnd() && IsDigit(text_[pos_])) ++pos_;
  }
  if (!AtEnd() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (!AtEnd() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (AtEnd() || !IsDigit(text_[pos_])) {
      return ErrorAt(pos_,
                     "invalid number: expected a digit in the exponent, found " + Describe(pos_));
    }
    while (!AtEnd() && IsDigit(text_[pos_])) ++pos_;
  }
  // The grammar is checked above, so strtod reads exactly this text (the "C" locale is in
  // effect: kolo-timeline never calls setlocale).
  const std::string literal(text_.substr(start, pos_ - start));
  const double value = std::strtod(literal.c_str(), nullptr);
  if (std::isinf(value)) return ErrorAt(start, "number out of range: " + literal);
  return JsonValue(value);
}

}  // namespace

std::string TextPosition(std::string_view text, size_t offset) {
  if (offset > text.size()) offset = text.size();
  size_t line = 1;
  size_t column = 1;
  for (size_t i = 0; i < offset; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((c & 0xC0) != 0x80) {  // not a UTF-8 continuation byte
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

StatusOr<JsonValue> ParseJsonValueAt(std::string_view text, size_t* offset) {
  Parser parser(text, *offset);
  StatusOr<JsonValue> value = parser.ParseValue(0);
  if (value.ok()) *offset = parser.pos();
  return value;
}

StatusOr<JsonValue> ParseJson(std::string_view text) {
  Parser parser(text, 0);
  StatusOr<JsonValue> value = parser.ParseValue(0);
  if (!value.ok()) return value;
  parser.SkipSpace();
  if (!parser.AtEnd()) {
    return parser.ErrorAt(parser.pos(),
                          "unexpected " + parser.Describe(parser.pos()) + " after the JSON value");
  }
  return value;
}

std::string DescribeByteAt(std::string_view text, size_t offset, const char* at_end) {
  if (offset >= text.size()) return at_end;
  const unsigned char c = static_cast<unsigned char>(text[offset]);
  char buffer[32];
  if (c >= 0x20 && c < 0x7F) {
    std::snprintf(buffer, sizeof(buffer), "'%c'", c);
  } else {
    std::snprintf(buffer, sizeof(buffer), "byte 0x%02x", c);
  }
  return buffer;
}

}  // namespace kolo::timeline
