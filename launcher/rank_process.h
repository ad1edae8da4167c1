// SpawnRank: starts one rank of a kolorun job with fork/execvp. The child leads its own
// process group (so that kolorun can signal it together with whatever it starts), reads stdin
// from /dev/null or from a pipe that carries `stdin_data` and then stays open, and writes
// stdout and stderr into pipes whose read ends the caller polls.
// Called from kolorun's single thread only.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "kolo/status.h"
#include "launcher/signal_pipe.h"

namespace kolo::launcher {

// The exit code of a rank whose program could not be executed, as in a POSIX shell.
constexpr int kExecFailedCode = 127;

struct RankProcess {
  pid_t pid = -1;      // also its process group id
  int stdout_fd = -1;  // non-blocking read ends, owned by the caller
  int stderr_fd = -1;
  int stdin_fd = -1;  // write end of its stdin pipe, owned by the caller; -1: /dev/null
};

// Forks and executes `command` (searched in PATH like execvp) with environment `env`. If exec
// fails, the child prints "kolorun: cannot execute '<program>': <reason>" on its stderr pipe
// and exits with kExecFailedCode. `signals` supplies the dispositions the child restores.
// Non-empty `stdin_data` (at most a pipe buffer, 4 KiB) is written to the child's stdin pipe,
// whose write end the caller then holds open: closing it is the child's end-of-file (over ssh,
// what stops a remote rank). Non-empty `cpus`: the child binds itself to them before exec
// (sched_setaffinity); if the kernel refuses, it runs unbound. Fails only if the pipes or the
// fork cannot be made.
StatusOr<RankProcess> SpawnRank(const std::vector<std::string>& command,
                                const std::vector<std::string>& env, const SignalPipe& signals,
                                const std::string& stdin_data = "",
                                const std::vector<int>& cpus = {});

// A rank's wait status in words: "exited with code 3", "was killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int wait_status);

// The exit code a shell would report: the code, or 128 + the signal number.
int ExitCodeOf(int wait_status);

}  // namespace kolo::launcher
