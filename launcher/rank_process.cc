// fork/exec of one kolorun rank and wait-status helpers; see rank_process.h.
#include "launcher/rank_process.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace kolo::launcher {
namespace {

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Runs in the child between fork and exec; never returns.
[[noreturn]] void ExecChild(char* const* argv, char* const* envp, int in_fd, int out_fd, int err_fd,
                            const SignalPipe& signals, const ScopedSignalBlock& block,
                            pid_t kolorun, const cpu_set_t* bind) {
  // A rank dies with kolorun, even when kolorun is SIGKILLed and cannot stop it (the signal
  // survives exec; kolorun is single-threaded, so its main thread's death is its own). If
  // kolorun died before this line, the parent is already someone else: exit instead.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != kolorun) _exit(kExecFailedCode);
  setpgid(0, 0);
  // --bind-to core; a refusal (a CPU gone offline since kolorun read its mask) leaves the rank
  // unbound, which is only slower.
  if (bind != nullptr) sched_setaffinity(0, sizeof(*bind), bind);
  signals.RestoreInChild();
  block.RestoreInChild();
  if (in_fd < 0) in_fd = open("/dev/null", O_RDONLY);
  if (in_fd >= 0) dup2(in_fd, STDIN_FILENO);
  dup2(out_fd, STDOUT_FILENO);
  dup2(err_fd, STDERR_FILENO);
  execvpe(argv[0], argv, envp);
  // kolorun is single-threaded, so formatting here is safe.
  char message[512];
  int len = std::snprintf(message, sizeof(message), "kolorun: cannot execute '%s': %s\n", argv[0],
                          std::strerror(errno));
  if (len > 0) {
    ssize_t ignored = write(STDERR_FILENO, message,
                            static_cast<size_t>(len) < sizeof(message) ? static_cast<size_t>(len)
                                                                       : sizeof(message) - 1);
    (void)ignored;
  }
  _exit(kExecFailedCode);
}

}  // namespace

StatusOr<RankProcess> SpawnRank(const std::vector<std::string>& command,
                                const std::vector<std::string>& env, const SignalPipe& signals,
                                const std::string& stdin_data, const std::vector<int>& cpus) {
  std::vector<char*> argv = CStrings(command);
  cpu_set_t cpu_set;  // made here: the child only hands it to the kernel
  CPU_ZERO(&cpu_set);
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &cpu_set);
  }
  const cpu_set_t* bind = cpus.empty() ? nullptr : &cpu_set;
  std::vector<char*> envp = CStrings(env);
  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1};
  auto close_all = [&] {
    for (int* pair : {out, err, in}) {
      for (int i = 0; i < 2; ++i) {
        if (pair[i] >= 0) close(pair[i]);
      }
    }
  };
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      (!stdin_data.empty() && pipe2(in, O_CLOEXEC) != 0)) {
    Status status = Unavailable(std::string("cannot create a pipe: ") + std::strerror(errno));
    close_all();
    return status;
  }
  if (!stdin_data.empty()) {
    // An empty pipe takes at least 4 KiB without blocking; the data is a line or two.
    ssize_t n = write(in[1], stdin_data.data(), stdin_data.size());
    if (n != static_cast<ssize_t>(stdin_data.size())) {
      Status status = Unavailable(std::string("cannot write to a rank's stdin pipe: ") +
                                  (n < 0 ? std::strerror(errno) : "short write"));
      close_all();
      return status;
    }
  }
  pid_t pid;
  {
    ScopedSignalBlock block;
    const pid_t kolorun = getpid();
    pid = fork();
    if (pid == 0) {
      ExecChild(argv.data(), envp.data(), in[0], out[1], err[1], signals, block, kolorun, bind);
    }
  }
  if (pid < 0) {
    Status status = Unavailable(std::string("cannot fork: ") + std::strerror(errno));
    close_all();
    return status;
  }
  // Also set here, so that the group exists before kolorun may signal it (EACCES once the
  // child has exec'd means it already did it itself).
  setpgid(pid, pid);
  close(out[1]);
  close(err[1]);
  if (in[0] >= 0) close(in[0]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  return RankProcess{pid, out[0], err[0], in[1]};
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "unknown") + ")";
  }
  return "ended with wait status " + std::to_string(wait_status);
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace kolo::launcher
