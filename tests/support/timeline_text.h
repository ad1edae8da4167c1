// Reading a rank's timeline file in a test: its whole text, whether an activity (a phase name
// such as "SHM_ALLGATHER") appears in it and how often a string does, which is how the runtime
// tests tell which path an op took. Header-only; free functions.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace kolo::testing {

// The file's text; empty when it cannot be read.
inline std::string FileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether a timeline's text names `activity` (as a JSON string, so "RING_ALLREDUCE" does not
// match "HIERARCHICAL_RING_ALLREDUCE").
inline bool HasActivity(const std::string& timeline, const std::string& activity) {
  return timeline.find("\"" + activity + "\"") != std::string::npos;
}

// How many times `needle` occurs in `text` (a timeline's: "EAGER_ALLREDUCE", "\"seq\":0,").
inline int CountOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace kolo::testing
