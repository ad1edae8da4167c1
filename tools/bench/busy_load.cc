#include "tools/bench/busy_load.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace kolo::bench {
namespace {

// The child: no allocation, no locks (it was forked from a process with threads).
[[noreturn]] void Spin(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);  // the parent died before the line above
  cpu_set_t every;
  CPU_ZERO(&every);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (long cpu = 0; cpu < cpus && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &every);
  sched_setaffinity(0, sizeof(every), &every);  // unbound, as a shell's `yes` is
  volatile unsigned long counter = 0;
  for (;;) counter = counter + 1;
}

}  // namespace

StatusOr<std::unique_ptr<BusyLoad>> BusyLoad::Start(int count) {
  std::unique_ptr<BusyLoad> load(new BusyLoad());
  const pid_t parent = getpid();
  for (int i = 0; i < count; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      return Internal("--busy: fork() of busy process " + std::to_string(i + 1) + " of " +
                      std::to_string(count) + " failed: " + std::strerror(errno));
    }
    if (pid == 0) Spin(parent);
    load->pids_.push_back(pid);
  }
  return load;
}

BusyLoad::~BusyLoad() {
  for (pid_t pid : pids_) kill(pid, SIGKILL);
  for (pid_t pid : pids_) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace kolo::bench
