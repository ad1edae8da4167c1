// Supervisor: kolorun's single-threaded event loop. Starts the ranks of a job as its JobPlan
// says (locally, through a launch template or over ssh), forwards their output line by line
// with a "[rank] " prefix (and, with an output directory, raw into per-rank files), forwards
// SIGINT/SIGTERM/SIGHUP to every rank, and stops the job when one rank fails: SIGTERM to the
// others, SIGKILL after a grace period. Runs on kolorun's main thread; not reentrant (one
// SignalPipe per process).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/job_plan.h"

namespace kolo::launcher {

struct SupervisorConfig {
  // Between SIGTERM and SIGKILL when the job is being stopped.
  std::chrono::milliseconds kill_grace{5000};
  // After the last rank has exited, how long to keep reading pipes that something the rank
  // started (and left running) still holds open.
  std::chrono::milliseconds drain_grace{2000};
  int stdout_fd = 1;  // where the ranks' prefixed stdout and stderr lines go
  int stderr_fd = 2;  // also where kolorun's own messages go
  // Non-empty: rank r's raw stdout and stderr also go to <output_dir>/rank.<r>.out and .err
  // (created, truncated); the directory is created if missing.
  std::string output_dir;
};

// Starts every rank of `plan` and supervises them until all have exited. A rank's stdin pipe
// (RankLaunch::stdin_data) is closed when the rank exits or is stopped. Returns kolorun's exit
// code: 0 if every rank exited 0; otherwise the first failing rank's code (128 + signal if killed);
// 128 + signal if kolorun itself was interrupted and no rank failed; 1 if the job could not be
// started.
int RunJob(const std::vector<RankLaunch>& plan, const SupervisorConfig& config);

}  // namespace kolo::launcher
