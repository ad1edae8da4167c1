// LineSplitter: reassembles one output stream of one rank, fed with the bytes as they arrive
// from its pipe, into whole lines that each start with the rank's prefix ("[3] "). kolorun's
// poll loop writes what it returns with one write(2), so lines of different ranks never mix
// mid-line. Not thread-safe; one per (rank, stream).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kolo::launcher {

class LineSplitter {
 public:
  // A line longer than `max_line` bytes is emitted in pieces of that size, each as its own
  // prefixed line, so that a rank that never prints '\n' cannot grow kolorun's memory.
  static constexpr size_t kDefaultMaxLine = 64 * 1024;

  explicit LineSplitter(std::string prefix, size_t max_line = kDefaultMaxLine);

  // Takes the next bytes of the stream. Returns the lines they complete, each prefixed and
  // ending in '\n', concatenated; empty when no line is complete yet.
  std::string Feed(std::string_view bytes);

  // At the end of the stream: returns the unterminated last line, prefixed and given a '\n',
  // or "" if the stream ended with a newline.
  std::string Flush();

 private:
  void Emit(std::string_view line, std::string* out) const;

  const std::string prefix_;
  const size_t max_line_;
  std::string partial_;  // bytes after the last '\n' seen
};

}  // namespace kolo::launcher
