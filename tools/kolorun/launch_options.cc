// Parsing of kolorun's command line; see launch_options.h.
#include "tools/kolorun/launch_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "core/config/config_table.h"

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

// --start-timeout becomes KOLO_START_TIMEOUT_SECONDS: accepted as that row of the config table
// accepts it.
Status CheckStartTimeout(const std::string& flag, const std::string& text) {
  const ConfigVar& row = FindConfigVar("KOLO_START_TIMEOUT_SECONDS");
  Options scratch;
  if (!row.apply(row.name, text, &scratch).ok()) {
    return InvalidArgument(flag + " must be " + row.expected + " seconds, got '" + text + "'");
  }
  return Status::Ok();
}

StatusOr<int> ParsePort(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  long value = text.empty() ? 0 : std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || value < 1 || value > 65535) {
    return InvalidArgument(flag + " must be a port in [1, 65535], got '" + text + "'");
  }
  return static_cast<int>(value);
}

std::string FormatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

StatusOr<double> ParseSeconds(const std::string& flag, const std::string& text, double low,
                              double high) {
  errno = 0;
  char* end = nullptr;
  double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0' || !(value >= low) || !(value <= high)) {
    return InvalidArgument(flag + " must be a number of seconds in [" + FormatNumber(low) + ", " +
                           FormatNumber(high) + "], got '" + text + "'");
  }
  return value;
}

// The elastic options that take one value; false if `flag` is not one of them.
StatusOr<bool> ApplyElasticOption(const std::string& flag, const std::string& value,
                                  ElasticLaunch* elastic) {
  if (flag == "--min-np") {
    KOLO_ASSIGN_OR_RETURN(elastic->min_np, ParseRankCount(flag, value));
  } else if (flag == "--max-np") {
    KOLO_ASSIGN_OR_RETURN(elastic->max_np, ParseRankCount(flag, value));
  } else if (flag == "--host-discovery-script") {
    if (value.empty()) return InvalidArgument(flag + " needs a program");
    elastic->discovery_script = value;
  } else if (flag == "--slots") {
    KOLO_ASSIGN_OR_RETURN(elastic->slots, ParseRankCount(flag, value));
    return true;  // a detail of discovery, not a switch to elastic mode
  } else if (flag == "--elastic-timeout") {
    KOLO_ASSIGN_OR_RETURN(elastic->timeout_seconds, ParseSeconds(flag, value, 0.1, 86400));
    return true;
  } else if (flag == "--reset-limit") {
    KOLO_ASSIGN_OR_RETURN(elastic->reset_limit, ParseRankCount(flag, value));
    return true;
  } else {
    return false;
  }
  elastic->enabled = true;
  return true;
}

// Applies one option that takes a value; `value` is the next argument.
Status ApplyValueOption(const std::string& flag, const std::string& value, LaunchOptions* options,
                        bool* have_hosts) {
  KOLO_ASSIGN_OR_RETURN(bool elastic, ApplyElasticOption(flag, value, &options->elastic));
  if (elastic) return Status::Ok();
  if (IsRankCountFlag(flag)) {
    KOLO_ASSIGN_OR_RETURN(int count, ParseRankCount(flag, value));
    options->num_ranks = count;
  } else if (flag == "-H" || flag == "--host" || flag == "--hostfile") {
    if (*have_hosts) return InvalidArgument(flag + ": give one host list (-H or --hostfile)");
    KOLO_ASSIGN_OR_RETURN(std::vector<Host> hosts,
                          flag == "--hostfile" ? ReadHostfile(value) : ParseHostList(value));
    options->hosts = std::move(hosts);
    *have_hosts = true;
  } else if (flag == "--launch-cmd") {
    if (value.empty()) return InvalidArgument("--launch-cmd needs a command template");
    options->launch_template = value;
  } else if (flag == "--rsh") {
    if (value.empty()) return InvalidArgument("--rsh needs a program");
    options->ssh.program = value;
  } else if (flag == "-p" || flag == "--ssh-port") {
    KOLO_ASSIGN_OR_RETURN(int port, ParsePort(flag, value));
    options->ssh.port = port;
  } else if (flag == "-i" || flag == "--ssh-identity") {
    if (value.empty()) return InvalidArgument(flag + " needs a key file");
    options->ssh.identity = value;
  } else if (flag == "-x") {
    if (value.empty() || value[0] == '=') return InvalidArgument("-x needs NAME or NAME=VALUE");
    options->forward_env.push_back(value);
  } else if (flag == "--start-timeout") {
    KOLO_RETURN_IF_ERROR(CheckStartTimeout(flag, value));
    options->start_timeout = value;
  } else if (flag == "--bind-to") {
    if (value != "core" && value != "none") {
      return InvalidArgument("--bind-to must be core or none, got '" + value + "'");
    }
    options->bind_to_cores = value == "core";
  } else if (flag == "--output-dir") {
    if (value.empty()) return InvalidArgument("--output-dir needs a directory");
    options->output_dir = value;
  } else {
    return InvalidArgument("unknown option '" + flag + "'");
  }
  return Status::Ok();
}

// Elastic mode's rules: hosts from a discovery script or a host list (not both), and
// min_np <= np <= max_np.
Status CheckElastic(bool have_hosts, LaunchOptions* options) {
  ElasticLaunch& elastic = options->elastic;
  if (have_hosts == !elastic.discovery_script.empty()) {
    return InvalidArgument(
        "an elastic job (--min-np, --max-np, --host-discovery-script) takes its hosts from "
        "--host-discovery-script or from -H/--hostfile: give one of them");
  }
  if (options->dry_run) return InvalidArgument("--dry-run does not apply to an elastic job");
  if (options->num_ranks == 0) {
    if (elastic.min_np == 0) {
      return InvalidArgument("an elastic job needs -np N (the ranks to start with) or --min-np");
    }
    options->num_ranks = elastic.min_np;
  }
  if (elastic.min_np == 0) elastic.min_np = options->num_ranks;
  if (elastic.max_np == 0) elastic.max_np = have_hosts ? TotalSlots(options->hosts) : kMaxRanks;
  elastic.max_np = std::min(elastic.max_np, kMaxRanks);
  if (elastic.min_np > options->num_ranks || options->num_ranks > elastic.max_np) {
    return InvalidArgument(
        "an elastic job needs --min-np <= -np <= --max-np, got " + std::to_string(elastic.min_np) +
        ", " + std::to_string(options->num_ranks) + ", " + std::to_string(elastic.max_np));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<LaunchOptions> ParseLaunchOptions(const std::vector<std::string>& args) {
  LaunchOptions options;
  bool have_hosts = false;
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
    if (arg == "--dry-run") {
      options.dry_run = true;
      continue;
    }
    if (arg == "--blacklist-cooldown-range") {  // Horovod's: two values, MIN and MAX seconds
      if (i + 2 >= args.size()) return InvalidArgument(arg + " needs MIN and MAX seconds");
      KOLO_ASSIGN_OR_RETURN(options.elastic.cooldown_min_seconds,
                            ParseSeconds(arg + " MIN", args[i + 1], 1, 3600));
      KOLO_ASSIGN_OR_RETURN(options.elastic.cooldown_max_seconds,
                            ParseSeconds(arg + " MAX", args[i + 2], 1, 3600));
      if (options.elastic.cooldown_max_seconds < options.elastic.cooldown_min_seconds) {
        return InvalidArgument(arg + ": MAX must not be below MIN");
      }
      i += 2;
      continue;
    }
    if (i + 1 >= args.size()) return InvalidArgument(arg + " needs a value");
    KOLO_RETURN_IF_ERROR(ApplyValueOption(arg, args[i + 1], &options, &have_hosts));
    ++i;
  }
  options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (options.elastic.enabled) {
    KOLO_RETURN_IF_ERROR(CheckElastic(have_hosts, &options));
    if (options.command.empty()) return InvalidArgument("missing the program to run");
    return options;
  }
  if (options.num_ranks == 0 && !have_hosts) {
    return InvalidArgument("missing -np N (the number of ranks to start)");
  }
  if (have_hosts && options.num_ranks == 0) options.num_ranks = TotalSlots(options.hosts);
  if (options.num_ranks > kMaxRanks) {
    return InvalidArgument("the host list has " + std::to_string(options.num_ranks) +
                           " slots; give -np N, at most " + std::to_string(kMaxRanks));
  }
  if (options.command.empty()) return InvalidArgument("missing the program to run");
  return options;
}

std::string UsageText() {
  return R"(Usage: kolorun -np N [OPTIONS] [--] PROGRAM [ARGS...]
       kolorun [-np N] -H HOST[=ADDR][:SLOTS],... | --hostfile FILE [OPTIONS] [--] PROGRAM ...
       kolorun --help | --help-env

Starts N processes (ranks) of PROGRAM, each in its own process group, and waits for them.
Every output line of a rank is prefixed with "[rank] " (stdout to stdout, stderr to stderr).
Ranks read their standard input from /dev/null.

Options:
  -np N, -n N           number of ranks, 1..1024 (with a host list: default one per slot)
  -H, --host LIST       hosts: NAME[=ADDR][:SLOTS],... (SLOTS default 1); ranks fill the
                        first host's slots first. ADDR is where the other ranks reach NAME.
  --hostfile FILE       hosts, one per line: NAME [slots=N] [address=ADDR]; '#' comments
  --launch-cmd TEMPLATE start every rank as "TEMPLATE PROGRAM ARGS..." through /bin/sh, with
                        {host} and {addr} replaced (e.g. 'ip netns exec {host}'); no ssh
  -p, --ssh-port PORT   ssh port for remote hosts
  -i, --ssh-identity F  ssh identity file for remote hosts
  --rsh PROGRAM         an ssh-compatible program to use instead of ssh
  -x NAME[=VALUE]       also pass NAME to ranks started over ssh (KOLO_* and HOROVOD_*
                        variables are passed on by default)
  --start-timeout S     ranks fail init() if the job is not complete after S seconds
                        (sets KOLO_START_TIMEOUT_SECONDS)
  --output-dir DIR      also write each rank's raw stdout and stderr to DIR/rank.N.out and
                        DIR/rank.N.err (DIR is created)
  --bind-to core|none   core (default): bind the ranks started on this host to disjoint
                        blocks of the CPUs kolorun may use, when there are at least as many
                        CPUs as such ranks (and two or more ranks), and tell them so
                        (KOLO_CPU_BIND=core); none: leave placement to the scheduler
                        (for several jobs on one host: each binds from the first CPU)
  --dry-run             print each rank's host, command line and environment; start nothing
  --                    ends kolorun's options; what follows is the program and its arguments
  --help                print this text
  --help-env            print the configuration variables the kolo runtime reads

Elastic jobs (docs/ELASTIC.md): the job keeps training when ranks fail and grows when hosts
appear; each process asks kolorun for its rank at every init():
  --min-np N            fewer ranks than N for --elastic-timeout ends the job (default -np)
  --max-np N            never more ranks than N (default: every slot)
  --host-discovery-script P  a program printing the usable hosts, one "HOST[:SLOTS]" a line;
                        run every second (instead of -H/--hostfile)
  --slots N             slots of a discovered host whose line gives none (default 1)
  --elastic-timeout S   how long to wait for --min-np ranks, or for every rank to rejoin
                        (default 600)
  --reset-limit N       end the job after N re-formations
  --blacklist-cooldown-range MIN MAX  a host whose rank failed may be used again after a
                        cooldown growing from MIN to at most MAX seconds (default: never)
A worker's lines are prefixed "[HOST:SLOT] "; it gets KOLO_ELASTIC_* variables instead of
KOLO_RANK and KOLO_SIZE. A failed worker does not stop the others: they re-form without it.
kolorun exits when every worker has: 0 if the last generation's all exited 0, else the first
of their codes; 1 when fewer than --min-np were left for --elastic-timeout.

Hosts named localhost, any 127.x.y.z or this host's name run locally; others over
"ssh -o BatchMode=yes HOST", in the same working directory as kolorun.

Each rank gets, in its environment:
  KOLO_RANK, KOLO_SIZE              rank in [0, N) and N
  KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE  its index among the ranks of its host, and their number
  KOLO_CONTROLLER=HOST:PORT         127.0.0.1 or the first host's address, and a free port
  KOLO_HOSTNAME                     (host lists only) the host's name as given
  KOLO_SECRET                       a fresh 32-byte job secret, never on a command line (over
                                    ssh it travels on ssh's standard input)
  KOLO_JOB_ID                       a fresh job name, bound into every handshake
  KOLO_CPU_BIND=core                (ranks bound by --bind-to core) its CPUs are its own

SIGINT, SIGTERM and SIGHUP are forwarded to every rank. When a rank exits with a non-zero code
or is killed by a signal, kolorun sends SIGTERM to the other ranks, SIGKILL 5 s later to those
still running, and exits with that first failure's code (128+signal for a signal). Otherwise it
exits 0 once every rank has exited 0, or 128+signal if it was itself interrupted. A rank
started over ssh is stopped when its ssh process is.
)";
}

}  // namespace kolo::launcher
