// Parsing of kolorun's command line; see launch_options.h.
#include "tools/kolorun/launch_options.h"

#include <cerrno>
#include <cstdlib>

namespace kolo::launcher {
namespace {

// Parses a decimal rank count in [1, kMaxRanks]; the whole string must be the number.
StatusOr<int> ParseRankCount(const std::string& flag, const std::string& text) {
  const std::string range = "an integer in [1, " + std::to_string(kMaxRanks) + "]";
  // strtol alone would accept " 4" and "+4".
  if (text.empty() || text[0] < '0' || text[0] > '9') {
    return InvalidArgument(flag + " must be " + range + ", got '" + text + "'");
  }
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < 1 || value > kMaxRanks) {
    return InvalidArgument(flag + " must be " + range + ", got '" + text + "'");
  }
  return static_cast<int>(value);
}

bool IsRankCountFlag(const std::string& arg) {
  return arg == "-np" || arg == "-n" || arg == "--np";
}

}  // namespace

StatusOr<LaunchOptions> ParseLaunchOptions(const std::vector<std::string>& args) {
  LaunchOptions options;
  bool have_count = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    if (arg == "-h" || arg == "--help") {
      options.show_help = true;
      return options;
    }
    if (arg == "--help-env") {
      options.show_env_help = true;
      return options;
    }
    if (!IsRankCountFlag(arg)) {
      return InvalidArgument("unknown option '" + arg + "'");
    }
    if (i + 1 >= args.size()) return InvalidArgument(arg + " needs a value (the number of ranks)");
    StatusOr<int> count = ParseRankCount(arg, args[++i]);
    if (!count.ok()) return count.status();
    options.num_ranks = count.value();
    have_count = true;
  }
  options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (!have_count) return InvalidArgument("missing -np N (the number of ranks to start)");
  if (options.command.empty()) return InvalidArgument("missing the program to run");
  return options;
}

std::string UsageText() {
  return R"(Usage: kolorun -np N [--] PROGRAM [ARGS...]
       kolorun --help | --help-env

Starts N processes (ranks) of PROGRAM on this host, each in its own process group, and waits
for them. Every output line of a rank is prefixed with "[rank] " (stdout to stdout, stderr to
stderr). Ranks read their standard input from /dev/null.

Options:
  -np N, -n N   number of ranks to start, 1..1024 (required)
  --            ends kolorun's options; what follows is the program and its arguments
  --help        print this text
  --help-env    print the configuration variables the kolo runtime reads

Each rank gets, in its environment (never on a command line):
  KOLO_RANK, KOLO_SIZE              rank in [0, N) and N
  KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE  the same, as all ranks run on this host
  KOLO_CONTROLLER=127.0.0.1:PORT    a free port, for the controller that rank 0 hosts
  KOLO_SECRET                       a fresh 32-byte job secret (64 hex digits)
  KOLO_JOB_ID                       a fresh job name, bound into every handshake

SIGINT, SIGTERM and SIGHUP are forwarded to every rank. When a rank exits with a non-zero code
or is killed by a signal, kolorun sends SIGTERM to the other ranks, SIGKILL 5 s later to those
still running, and exits with that first failure's code (128+signal for a signal). Otherwise it
exits 0 once every rank has exited 0, or 128+signal if it was itself interrupted.
)";
}

}  // namespace kolo::launcher
