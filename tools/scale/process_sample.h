// What kolo-scale reads about a process of its own: CPU time used so far, resident memory and
// thread count (/proc/self/status), and the lines of the small pipe protocol between its
// processes. Plain functions; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "kolo/status.h"

namespace kolo::scale {

struct ProcessSample {
  int64_t cpu_ns = 0;  // CLOCK_PROCESS_CPUTIME_ID: every thread of the process
  int64_t rss_kb = 0;  // VmRSS
  int threads = 0;     // Threads
};

// This process, now.
ProcessSample SampleSelf();

// "cpu_ns rss_kb threads" and back.
std::string SampleText(const ProcessSample& sample);
StatusOr<ProcessSample> ParseSample(const std::string& text);

// Writes `line` and a newline to `fd` (a pipe); fails naming `what` if the other end is gone.
Status WriteLine(int fd, const std::string& line, const std::string& what);
// Reads one line (without its newline) from `fd`, waiting at most until `deadline`; fails
// naming `what` at the deadline or when the other end closed first. Reads a byte at a time,
// so nothing past the line is consumed.
StatusOr<std::string> ReadLine(int fd, std::chrono::steady_clock::time_point deadline,
                               const std::string& what);

}  // namespace kolo::scale
