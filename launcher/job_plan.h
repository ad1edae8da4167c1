// JobPlan: how kolorun starts each rank of a job: on which host, with which local command line,
// environment and standard input. Built from the parsed command line before anything starts;
// --dry-run prints it. Pure functions (no I/O) for kolorun's main thread and for tests.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"
#include "launcher/job_environment.h"
#include "launcher/launch_options.h"

namespace kolo::launcher {

enum class LaunchPath {
  kLocal,     // fork/exec on this host
  kTemplate,  // /bin/sh -c "exec TEMPLATE PROGRAM ARGS..." on this host
  kSsh,       // ssh HOST 'sh -c SCRIPT', the secret on ssh's stdin
};

struct RankLaunch {
  int rank = 0;
  std::string host;  // as given in the host list; "localhost" without one
  LaunchPath path = LaunchPath::kLocal;
  std::vector<std::string> argv;  // what kolorun executes here
  std::vector<std::string> env;   // the environment of argv[0] here
  std::string stdin_data;         // written to its stdin, which stays open until it exits;
                                  // empty: stdin is /dev/null
  std::vector<EnvVar> rank_vars;  // what kolorun adds to the rank's environment, but the secret
  std::string remote_command;     // kSsh: the rank's command line on the remote host
  std::vector<int> cpus;          // kLocal: the CPUs it is bound to (--bind-to); empty: not bound
};

// What the plan depends on besides the command line.
struct PlanContext {
  std::vector<std::string> base_env;  // kolorun's environment
  std::string this_host;              // gethostname()
  std::string working_dir;            // remote ranks cd here
  std::vector<int> cpus;              // the CPUs kolorun may run on, ascending (--bind-to)
};

// The host rank 0's controller listens on, as the other ranks must reach it: 127.0.0.1 when
// every rank runs here without a template; otherwise the first host's address (its name if it
// has none; this host's name if it is a loopback name and other hosts are remote).
std::string ControllerHost(const LaunchOptions& options, const PlanContext& context);

// Whether `name` means this host (localhost, an address of 127.0.0.0/8, [::1], or this host's
// name, short or full).
bool IsThisHost(const std::string& name, const std::string& this_host);

// Completes `launch` (its host and rank_vars set) for how a process starts on `host`: locally
// (fork/exec), through --launch-cmd, or over ssh; the secret travels its path's way (the
// environment here, ssh's stdin there). Fails for an -x variable that is not set.
Status PlanLaunchPath(const LaunchOptions& options, const Host& host, const std::string& secret,
                      const PlanContext& context, RankLaunch* launch);

// One RankLaunch per rank, in rank order. `job` supplies size, controller and secret. Fails
// for -np larger than the hosts' slots and for an -x variable that is not set. With
// --bind-to core, two or more ranks started locally (fork/exec) and at least as many CPUs in
// context.cpus: the i-th local rank gets the i-th of as many equal blocks of those CPUs (the
// rest unused) and KOLO_CPU_BIND=core.
StatusOr<std::vector<RankLaunch>> PlanJob(const LaunchOptions& options, const JobLayout& job,
                                          const PlanContext& context);

// The --dry-run text: per rank, its host, how it is started, the command line and the variables
// kolorun gives it (the secret shown as a placeholder).
std::string FormatPlan(const std::vector<RankLaunch>& plan);

}  // namespace kolo::launcher
