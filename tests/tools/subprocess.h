// Subprocess: runs a real program for the tools' tests, with its stdout and stderr captured in
// temporary files, and reports how it ended and how long it took. Single-threaded use; the
// destructor kills (SIGKILL) a child that is still running and removes the files.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace kolo::testing {

struct ProcessResult {
  int exit_code = -1;  // the code, or 128 + signal, as a shell reports it
  std::string out;
  std::string err;
  double seconds = 0;  // from Start() to the end of Wait()
};

class Subprocess {
 public:
  // Starts argv[0] (searched in PATH) with argv and the caller's environment plus `extra_env`
  // ("NAME=value"). Aborts the test binary if the process cannot be started.
  explicit Subprocess(const std::vector<std::string>& argv,
                      const std::vector<std::string>& extra_env = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // What the process has written to stdout so far.
  std::string StdoutSoFar() const;
  // Polls StdoutSoFar() until it contains `text` `times` times or `limit` passes.
  bool WaitForOutput(const std::string& text, int times, std::chrono::milliseconds limit) const;
  // Waits for the process to end (the test's watchdog bounds this).
  ProcessResult Wait();

 private:
  pid_t pid_ = -1;
  std::string out_path_;
  std::string err_path_;
  std::chrono::steady_clock::time_point start_;
};

// Runs argv to completion.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::vector<std::string>& extra_env = {});

// How many times `needle` occurs in `haystack`.
int CountOccurrences(const std::string& haystack, const std::string& needle);

// `text` split at '\n' (no trailing empty line).
std::vector<std::string> SplitLines(const std::string& text);

// The NAME=value pairs on the lines of rank `rank` in kolorun's output ("[2] KOLO_RANK=2").
std::map<std::string, std::string> VariablesOfRank(const std::string& out, int rank);

}  // namespace kolo::testing
