// HostDiscovery: runs an elastic job's --host-discovery-script (Horovod's contract: it prints
// the hosts that may run workers now, one "HOST[:SLOTS]" a line) and parses what it printed.
// DiscoveryRun is one run that does not block: the elastic driver polls its pipe in its own
// loop, so a hung script holds nothing up (not a re-formation, not the workers' output).
// Called on kolorun's single thread; RunDiscoveryScript blocks for at most its timeout.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "launcher/host_list.h"

namespace kolo::launcher {

// The hosts in `output`: one per non-blank line, "NAME[=ADDRESS][:SLOTS]" as in -H, with
// `default_slots` where a line gives none. A host listed twice adds its slots to its first place.
// The error names the offending line.
StatusOr<std::vector<Host>> ParseDiscoveredHosts(const std::string& output, int default_slots);

// One run of the script: started by Start (with /bin/sh -c, so it may carry arguments; its
// stdin /dev/null, its stderr kolorun's, its stdout a non-blocking pipe, leading its own process
// group), read by Pump when fd() is readable, and finished by Check. The destructor kills (with
// its process group) and reaps a run still going.
class DiscoveryRun {
 public:
  using Clock = std::chrono::steady_clock;

  static StatusOr<std::unique_ptr<DiscoveryRun>> Start(const std::string& script, int default_slots,
                                                       std::chrono::milliseconds timeout);
  ~DiscoveryRun();
  DiscoveryRun(const DiscoveryRun&) = delete;
  DiscoveryRun& operator=(const DiscoveryRun&) = delete;

  // The read end of its stdout while open (for poll), else -1.
  int fd() const { return fd_; }
  // Reads what the pipe has (without blocking); closes it at end of file.
  void Pump();
  // nullopt while the script runs and its deadline has not passed; then its result (once):
  // the hosts, or an error naming the script when it exited non-zero, was killed, printed a
  // bad line or more than 1 MiB, or had not finished by the deadline (it is then killed). The
  // script is done when it exits: what it left running in its process group is killed.
  std::optional<StatusOr<std::vector<Host>>> Check(Clock::time_point now);
  pid_t pid() const { return pid_; }

 private:
  DiscoveryRun(std::string what, int default_slots, std::chrono::milliseconds timeout)
      : what_(std::move(what)), default_slots_(default_slots), timeout_(timeout) {}
  void Kill();

  const std::string what_;  // "--host-discovery-script '...'"
  const int default_slots_;
  const std::chrono::milliseconds timeout_;
  Clock::time_point deadline_;
  pid_t pid_ = -1;  // -1 once reaped
  int fd_ = -1;
  int wait_status_ = 0;
  bool too_long_ = false;  // printed more than 1 MiB
  bool reported_ = false;  // Check returned the result
  std::string output_;
};

// Runs `script` as a DiscoveryRun and waits for its result (at most `timeout`).
StatusOr<std::vector<Host>> RunDiscoveryScript(const std::string& script, int default_slots,
                                               std::chrono::milliseconds timeout);

}  // namespace kolo::launcher
