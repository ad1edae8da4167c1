// LaunchOptions: kolorun's command line, `kolorun -np N [--] program [args...]`.
// ParseLaunchOptions is a pure function (no I/O, no exit) so that tests can drive it; main()
// prints the usage text and the errors it returns.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::launcher {

// The largest job kolorun starts on one host.
constexpr int kMaxRanks = 1024;

struct LaunchOptions {
  int num_ranks = 0;
  std::vector<std::string> command;  // the program and its arguments, passed to execvp
  bool show_help = false;            // --help: print UsageText() and exit 0
  bool show_env_help = false;        // --help-env: print the configuration table and exit 0
};

// Parses the arguments that follow argv[0]. Options end at the first argument that does not
// start with '-' or after "--"; everything after that is the command, untouched.
// Fails with kInvalidArgument and a message naming the bad argument.
StatusOr<LaunchOptions> ParseLaunchOptions(const std::vector<std::string>& args);

// The text `kolorun --help` prints.
std::string UsageText();

}  // namespace kolo::launcher
