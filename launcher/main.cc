// kolorun: starts the N ranks of a kolo job, here or on several hosts, and supervises them.
//   kolorun -np 4 python train.py
//   kolorun -H node1:4,node2:4 python train.py
//   kolorun -np 4 --min-np 2 --max-np 8 --host-discovery-script ./hosts.sh python train.py
//   kolorun -np 8 -H a:4,b:4 --fusion-threshold-mb 32 --gloo python train.py   (horovodrun's)
// See UsageText() in usage_text.cc for the behaviour, job_plan.h for how each rank is started,
// supervisor.h for the stop policy, elastic_driver.h for elastic jobs, horovodrun_options.h for
// what horovodrun's options do.
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "launcher/check_build.h"
#include "launcher/elastic_driver.h"
#include "launcher/job_environment.h"
#include "launcher/job_plan.h"
#include "launcher/launch_options.h"
#include "launcher/output_streams.h"
#include "launcher/supervisor.h"

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

// --help, --help-env, --version and --check-build: prints what they ask for; false for a job.
bool PrintInformation(const kolo::launcher::LaunchOptions& options) {
  namespace launcher = kolo::launcher;
  std::string text;
  if (options.show_help) text = launcher::UsageText();
  if (options.show_env_help) text = kolo::FormatConfigTable();
  if (options.show_version) text = launcher::DetectBuild("").version + "\n";
  if (options.check_build) {
    text = launcher::FormatCheckBuild(launcher::DetectBuild(launcher::ThisExecutable()));
  }
  std::fputs(text.c_str(), stdout);
  return !text.empty();
}

// The ranks' output style and environment from horovodrun's options; their notes on stderr.
void ApplyHorovodrunOptions(kolo::launcher::LaunchOptions* options,
                            kolo::launcher::PlanContext* context) {
  namespace launcher = kolo::launcher;
  for (const std::string& note : options->rank_settings.notes) {
    std::fprintf(stderr, "kolorun: %s\n", note.c_str());
  }
  launcher::OutputStyle style;
  style.timestamps = options->prefix_timestamps;
  if (!options->output_filename.empty()) {
    // horovodrun pads rank numbers to the width of the largest: rank.03 of 12 ranks.
    style.horovod_layout_digits = static_cast<int>(std::to_string(options->num_ranks - 1).size());
    options->output_dir = options->output_filename;
  }
  launcher::SetOutputStyle(style);
  launcher::AddToRankEnvironment(options->rank_settings, &context->base_env, &options->forward_env);
  if (options->verbose || options->dry_run) {
    std::FILE* out = options->dry_run ? stdout : stderr;
    for (const auto& [name, value] : options->rank_settings.env) {
      std::fprintf(out, "every rank: %s=%s (from horovodrun options)\n", name.c_str(),
                   value.c_str());
    }
  }
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
  if (PrintInformation(*options)) return 0;

  launcher::PlanContext context;
  for (char** entry = environ; *entry != nullptr; ++entry) context.base_env.emplace_back(*entry);
  context.this_host = ThisHostName();
  context.working_dir = WorkingDirectory();
  context.cpus = AllowedCpus();
  ApplyHorovodrunOptions(&*options, &context);

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
  if (options->verbose) std::fputs(launcher::FormatPlan(*plan).c_str(), stderr);
  std::fflush(stdout);
  launcher::SupervisorConfig config;
  config.output_dir = options->output_dir;
  return launcher::RunJob(*plan, config);
}
