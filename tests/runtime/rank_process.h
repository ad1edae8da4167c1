// RankProcess: one rank of a fault test as a real process (tests/runtime/fault_worker.cc),
// started with its own KOLO_* environment and its stdout on a pipe, so that a test can SIGKILL
// or SIGSTOP it and read what the survivors report. Lines are kept with the time they were
// read; the worker also prints its own steady-clock time (CLOCK_MONOTONIC, shared by every
// process on the host) so that detection times are measured from the signal exactly.
//
// Threading: one owner thread. The destructor resumes and kills a child that is still running
// and reaps it, so a failed REQUIRE never leaves a process behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kolo::testing {

class RankProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts `path args...` with the test's environment minus every KOLO_* variable, plus
  // `env`. Check running() for success. `with_stderr`: its stderr (kolo's log) on the same
  // pipe, so that lines() holds the log too.
  RankProcess(const std::string& path, const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env, bool with_stderr = false);
  ~RankProcess();
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  bool running() const { return pid_ > 0 && !reaped_; }
  // Sends `sig`; returns the steady-clock time right before the signal was sent.
  Clock::time_point Signal(int sig);

  // The first line that starts with `prefix` and a space, without them; nullopt if none.
  std::optional<std::string> Find(const std::string& prefix) const;
  // Every line that starts with `prefix`, in order (prefix and one space removed).
  std::vector<std::string> FindAll(const std::string& prefix) const;
  const std::vector<std::string>& lines() const { return lines_; }

  // Waits up to `limit` for the process to exit; its exit code, 128+signal if it was killed,
  // or -1 if it is still running (then it is left running).
  int WaitExit(std::chrono::milliseconds limit);

  // Reads whatever the processes printed until `done()` holds or `deadline` passes; false on
  // the deadline.
  static bool Pump(const std::vector<RankProcess*>& processes, Clock::time_point deadline,
                   const std::function<bool()>& done);

 private:
  void ReadAvailable();

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  std::string partial_;             // read, no newline yet
  std::vector<std::string> lines_;  // complete lines, in order
};

// The time a worker printed as "<prefix> <ns> ...": its steady clock in nanoseconds.
RankProcess::Clock::time_point WorkerTime(const std::string& fields);
// The rest of a "<ns> <text>" field list: the text.
std::string AfterTime(const std::string& fields);
double SecondsBetween(RankProcess::Clock::time_point a, RankProcess::Clock::time_point b);

}  // namespace kolo::testing
