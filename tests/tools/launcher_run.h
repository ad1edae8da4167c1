// Helpers for the launcher tests: whether a tool is installed, free loopback ports, and several
// ranks of one program started by hand with per-rank environments (as torchrun or srun would).
// Single-threaded use.
#pragma once

#include <string>
#include <vector>

#include "tests/support/child_process.h"

namespace kolo::testing {

// True when `program` is an executable file in one of PATH's folders.
bool InPath(const std::string& program);

// A loopback TCP port that was free a moment ago (bound to port 0, then closed).
int FreeLoopbackPort();

// A socket listening on 127.0.0.1:port (to occupy a port); closed by the destructor.
class PortHolder {
 public:
  explicit PortHolder(int port);  // port() == 0 when the port could not be bound
  ~PortHolder();
  PortHolder(const PortHolder&) = delete;
  PortHolder& operator=(const PortHolder&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Starts argv once per entry of `rank_envs` (the caller's environment plus that entry) and
// waits for all of them; the test's watchdog bounds the wait.
std::vector<ProcessResult> RunRanks(const std::vector<std::string>& argv,
                                    const std::vector<std::vector<std::string>>& rank_envs);

}  // namespace kolo::testing
