#include "core/trace_sink.h"

#include <cctype>
#include <utility>

namespace kolo {

namespace {

// Length of the valid UTF-8 sequence starting at text[i] (a byte >= 0x80), or 0 if invalid
// (bad lead byte, missing continuation, overlong, surrogate or above U+10FFFF).
size_t Utf8SequenceLength(const std::string& text, size_t i) {
  const unsigned char lead = static_cast<unsigned char>(text[i]);
  size_t length = 0;
  uint32_t code = 0;
  if ((lead & 0xe0) == 0xc0) {
    length = 2;
    code = lead & 0x1f;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3;
    code = lead & 0x0f;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const unsigned char next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xc0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3f);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMin[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return length;
}

}  // namespace

std::string JsonEscape(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const unsigned char byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      out += "\\u00";  // control characters
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else if (byte < 0x80) {
      out += c;
    } else if (size_t length = Utf8SequenceLength(text, i); length > 0) {
      out.append(text, i, length);  // valid UTF-8 passes through
      i += length - 1;
    } else {
      out += "\\ufffd";  // an invalid byte would make the whole file unreadable
    }
  }
  return out;
}

TraceEvent ControllerTraceEvent(char phase, std::string track, std::string name,
                                Clock::TimePoint at) {
  TraceEvent event;
  event.phase = phase;
  event.pid = kControllerTracePid;
  event.track = std::move(track);
  event.name = std::move(name);
  event.start = at;
  return event;
}

std::string NegotiateSpanName(OpType op) {
  std::string name = "NEGOTIATE_" + OpTypeName(op);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace kolo
