// ChildProcess: a real program run by a test (kolorun, a tool, a fault-test peer), with its
// stdout and stderr captured in temporary files, optionally a pipe to its stdin, and how it
// ended and how long it took. The one process runner of the test suite: the tools' tests read
// output and exit codes; the fault tests trade lines with a peer, then SIGKILL or SIGSTOP it.
//
// Threading: one owner thread. The destructor resumes (SIGCONT) and kills (SIGKILL) a child
// that is still running, reaps it and removes the files, so a failed REQUIRE never leaves a
// process behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace kolo::testing {

struct ProcessResult {
  int exit_code = -1;  // the code, or 128 + signal, as a shell reports it
  std::string out;
  std::string err;
  double seconds = 0;  // from the start to the end of Wait()
};

class ChildProcess {
 public:
  enum class Stdin { kNull, kPipe };  // kPipe: WriteLine() and CloseStdin() feed it

  // Starts argv[0] (searched in PATH unless it has a '/') with argv and the caller's
  // environment plus `extra_env` ("NAME=value"; it replaces the caller's variable of that
  // name). Aborts the test binary if the process cannot be started.
  explicit ChildProcess(const std::vector<std::string>& argv,
                        const std::vector<std::string>& extra_env = {},
                        Stdin stdin_mode = Stdin::kNull);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `sig` to the child (until Wait() has reaped it).
  void Signal(int sig);

  // With Stdin::kPipe: writes `line` and a newline; closes the child's stdin (it reads EOF).
  void WriteLine(const std::string& line);
  void CloseStdin();

  // What the process has written to stdout so far.
  std::string StdoutSoFar() const;
  // Polls StdoutSoFar() until it contains `text` `times` times or `limit` passes.
  bool WaitForOutput(const std::string& text, int times, std::chrono::milliseconds limit) const;
  // What the process has written to stderr so far (kolo's log lines), and the same wait on it.
  std::string StderrSoFar() const;
  bool WaitForStderr(const std::string& text, std::chrono::milliseconds limit) const;
  // The next complete line of stdout after the last one returned (without '\n'); empty if
  // none arrives within `limit`.
  std::string ReadLine(std::chrono::milliseconds limit);

  // Waits for the process to end (the test's watchdog bounds this) and returns its output.
  ProcessResult Wait();

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  std::string out_path_;
  std::string err_path_;
  size_t lines_read_to_ = 0;  // offset in stdout after the last line ReadLine() returned
  std::chrono::steady_clock::time_point start_;
};

// Runs argv to completion.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::vector<std::string>& extra_env = {});

// How many times `needle` occurs in `haystack`.
int CountOccurrences(const std::string& haystack, const std::string& needle);

// `text` split at '\n' (no trailing empty line).
std::vector<std::string> SplitLines(const std::string& text);

}  // namespace kolo::testing
