// A small, strict JSON reader (RFC 8259) for kolo-timeline: trace events and tests.
// Rejects what JSON rejects (trailing commas, comments, NaN, lone surrogates, bad UTF-8,
// duplicate keys) and says where: errors read "LINE:COLUMN: what is wrong" (1-based; columns
// count characters, not bytes). Pure functions; safe to call from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kolo/status.h"
#include "tools/timeline/json_value.h"

namespace kolo::timeline {

// Objects and arrays nested deeper than this are rejected (keeps the recursion bounded).
constexpr int kMaxJsonDepth = 256;

// Parses `text` as exactly one JSON value; only whitespace may surround it.
// Fails with kInvalidArgument and a positioned message.
StatusOr<JsonValue> ParseJson(std::string_view text);

// Parses the one value that starts at `*offset` (leading whitespace skipped) and leaves
// `*offset` just past it; text after the value is not looked at. Positions in errors are
// relative to the start of `text`. On error `*offset` is unchanged.
StatusOr<JsonValue> ParseJsonValueAt(std::string_view text, size_t* offset);

// "LINE:COLUMN" (1-based) of byte `offset` in `text`.
std::string TextPosition(std::string_view text, size_t offset);

// The byte at `offset` for "found ..." messages: "'x'", "byte 0xff", or `at_end` past the end.
std::string DescribeByteAt(std::string_view text, size_t offset, const char* at_end);

}  // namespace kolo::timeline
