// kolorun: starts the N ranks of a kolo job, here or on several hosts, and supervises them.
//   kolorun -np 4 python train.py
//   kolorun -H node1:4,node2:4 python train.py
//   kolorun -np 4 --min-np 2 --max-np 8 --host-discovery-script ./hosts.sh python train.py
// See UsageText() in launch_options.cc for the behaviour, job_plan.h for how each rank is
// started, supervisor.h for the stop policy, elastic_driver.h for elastic jobs.
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "tools/kolorun/elastic_driver.h"
#include "tools/kolorun/job_environment.h"
#include "tools/kolorun/job_plan.h"
#include "tools/kolorun/launch_options.h"
#include "tools/kolorun/supervisor.h"

extern char** environ;

namespace {

// Exit code for a bad command line, distinct from the ranks' codes that kolorun passes on.
constexpr int kUsageError = 2;

std::string ThisHostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string WorkingDirectory() {
  std::vector<char> buffer(4096);
  if (getcwd(buffer.data(), buffer.size()) == nullptr) return ".";
  return buffer.data();
}

// The CPUs this process may run on, ascending (empty if the kernel does not say).
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

}  // namespace

int main(int argc, char** argv) {
  namespace launcher = kolo::launcher;
  std::vector<std::string> args(argv + 1, argv + argc);
  kolo::StatusOr<launcher::LaunchOptions> options = launcher::ParseLaunchOptions(args);
  if (!options.ok()) {
    std::fprintf(stderr, "kolorun: %s\nRun 'kolorun --help' for usage.\n",
                 options.status().message().c_str());
    return kUsageError;
  }
  if (options->show_help) {
    std::fputs(launcher::UsageText().c_str(), stdout);
    return 0;
  }
  if (options->show_env_help) {
    std::fputs(kolo::FormatConfigTable().c_str(), stdout);
    return 0;
  }

  launcher::PlanContext context;
  for (char** entry = environ; *entry != nullptr; ++entry) context.base_env.emplace_back(*entry);
  context.this_host = ThisHostName();
  context.working_dir = WorkingDirectory();
  context.cpus = AllowedCpus();

  kolo::StatusOr<launcher::JobLayout> job = launcher::PrepareJob(options->num_ranks);
  if (!job.ok()) {
    std::fprintf(stderr, "kolorun: cannot prepare the job: %s\n", job.status().message().c_str());
    return 1;
  }
  const kolo::Status secret_file = launcher::UseUserSecretFile(&context.base_env, &*job);
  if (!secret_file.ok()) {
    std::fprintf(stderr, "kolorun: %s\n", secret_file.message().c_str());
    return kUsageError;
  }
  if (options->elastic.enabled) {
    launcher::ElasticDriverConfig config;
    config.output.output_dir = options->output_dir;
    return launcher::RunElasticJob(*options, *job, context, config);
  }
  job->controller_host = launcher::ControllerHost(*options, context);
  job->start_timeout_seconds = options->start_timeout;
  kolo::StatusOr<std::vector<launcher::RankLaunch>> plan =
      launcher::PlanJob(*options, *job, context);
  if (!plan.ok()) {
    std::fprintf(stderr, "kolorun: %s\n", plan.status().message().c_str());
    return kUsageError;
  }
  if (options->dry_run) {
    std::fputs(launcher::FormatPlan(*plan).c_str(), stdout);
    return 0;
  }
  std::fflush(stdout);
  launcher::SupervisorConfig config;
  config.output_dir = options->output_dir;
  return launcher::RunJob(*plan, config);
}
