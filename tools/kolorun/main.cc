// kolorun: starts the N ranks of a local kolo job and supervises them.
//   kolorun -np 4 python train.py
// See UsageText() in launch_options.cc for the behaviour, supervisor.h for the stop policy.
#include <cstdio>
#include <string>
#include <vector>

#include "core/config_table.h"
#include "tools/kolorun/launch_options.h"
#include "tools/kolorun/supervisor.h"

extern char** environ;

// Exit code for a bad command line, distinct from the ranks' codes that kolorun passes on.
constexpr int kUsageError = 2;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  kolo::StatusOr<kolo::launcher::LaunchOptions> options = kolo::launcher::ParseLaunchOptions(args);
  if (!options.ok()) {
    std::fprintf(stderr, "kolorun: %s\nRun 'kolorun --help' for usage.\n",
                 options.status().message().c_str());
    return kUsageError;
  }
  if (options->show_help) {
    std::fputs(kolo::launcher::UsageText().c_str(), stdout);
    return 0;
  }
  if (options->show_env_help) {
    std::fputs(kolo::FormatConfigTable().c_str(), stdout);
    return 0;
  }

  std::vector<std::string> base_env;
  for (char** entry = environ; *entry != nullptr; ++entry) base_env.emplace_back(*entry);
  std::fflush(stdout);
  return kolo::launcher::RunJob(options->num_ranks, options->command, base_env,
                                kolo::launcher::SupervisorConfig{});
}
