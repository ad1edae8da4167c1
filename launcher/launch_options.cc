// Parsing of kolorun's command line; see launch_options.h.
#include "launcher/launch_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "core/config/config_table.h"
#include "launcher/config_file.h"
#include "launcher/option_table.h"

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

// The elastic options that take one value, by dest; false if `dest` is not one of them.
// `flag` is the option as given, for messages.
StatusOr<bool> ApplyElasticOption(const std::string& dest, const std::string& flag,
                                  const std::string& value, ElasticLaunch* elastic) {
  if (dest == "min_num_proc") {
    KOLO_ASSIGN_OR_RETURN(elastic->min_np, ParseRankCount(flag, value));
  } else if (dest == "max_num_proc") {
    KOLO_ASSIGN_OR_RETURN(elastic->max_np, ParseRankCount(flag, value));
  } else if (dest == "host_discovery_script") {
    if (value.empty()) return InvalidArgument(flag + " needs a program");
    elastic->discovery_script = value;
  } else if (dest == "slots") {
    KOLO_ASSIGN_OR_RETURN(elastic->slots, ParseRankCount(flag, value));
    return true;  // a detail of discovery, not a switch to elastic mode
  } else if (dest == "elastic_timeout") {
    KOLO_ASSIGN_OR_RETURN(elastic->timeout_seconds, ParseSeconds(flag, value, 0.1, 86400));
    return true;
  } else if (dest == "reset_limit") {
    KOLO_ASSIGN_OR_RETURN(elastic->reset_limit, ParseRankCount(flag, value));
    return true;
  } else {
    return false;
  }
  elastic->enabled = true;
  return true;
}

// Applies one option that takes a value, by its dest; `flag` is the option as given.
Status ApplyValueOption(const std::string& dest, const std::string& flag, const std::string& value,
                        LaunchOptions* options, bool* have_hosts) {
  KOLO_ASSIGN_OR_RETURN(bool elastic, ApplyElasticOption(dest, flag, value, &options->elastic));
  if (elastic) return Status::Ok();
  if (dest == "num_proc") {
    KOLO_ASSIGN_OR_RETURN(int count, ParseRankCount(flag, value));
    options->num_ranks = count;
  } else if (dest == "hosts" || dest == "hostfile") {
    if (*have_hosts) return InvalidArgument(flag + ": give one host list (-H or --hostfile)");
    KOLO_ASSIGN_OR_RETURN(std::vector<Host> hosts,
                          dest == "hostfile" ? ReadHostfile(value) : ParseHostList(value));
    options->hosts = std::move(hosts);
    *have_hosts = true;
  } else if (dest == "launch_cmd") {
    if (value.empty()) return InvalidArgument("--launch-cmd needs a command template");
    options->launch_template = value;
  } else if (dest == "rsh") {
    if (value.empty()) return InvalidArgument("--rsh needs a program");
    options->ssh.program = value;
  } else if (dest == "ssh_port") {
    KOLO_ASSIGN_OR_RETURN(int port, ParsePort(flag, value));
    options->ssh.port = port;
  } else if (dest == "ssh_identity_file") {
    if (value.empty()) return InvalidArgument(flag + " needs a key file");
    options->ssh.identity = value;
  } else if (dest == "forward_env") {
    if (value.empty() || value[0] == '=') return InvalidArgument("-x needs NAME or NAME=VALUE");
    options->forward_env.push_back(value);
  } else if (dest == "start_timeout") {
    KOLO_RETURN_IF_ERROR(CheckStartTimeout(flag, value));
    options->start_timeout = value;
  } else if (dest == "bind_to") {
    if (value != "core" && value != "none") {
      return InvalidArgument("--bind-to must be core or none, got '" + value + "'");
    }
    options->bind_to_cores = value == "core";
  } else if (dest == "output_dir" || dest == "output_filename" || dest == "config_file") {
    if (value.empty())
      return InvalidArgument(flag + " needs a " + (dest == "config_file" ? "file" : "directory"));
    (dest == "output_dir"        ? options->output_dir
     : dest == "output_filename" ? options->output_filename
                                 : options->config_file) = value;
  } else {
    return InvalidArgument("unknown option '" + flag + "'");  // a table row nobody handles
  }
  return Status::Ok();
}

// Horovod's --blacklist-cooldown-range MIN MAX.
Status ApplyCooldownRange(const std::string& flag, const std::string& low, const std::string& high,
                          ElasticLaunch* elastic) {
  KOLO_ASSIGN_OR_RETURN(elastic->cooldown_min_seconds, ParseSeconds(flag + " MIN", low, 1, 3600));
  KOLO_ASSIGN_OR_RETURN(elastic->cooldown_max_seconds, ParseSeconds(flag + " MAX", high, 1, 3600));
  if (elastic->cooldown_max_seconds < elastic->cooldown_min_seconds) {
    return InvalidArgument(flag + ": MAX must not be below MIN");
  }
  return Status::Ok();
}

// The options that take no value, by dest: true if `dest` is one of them.
bool ApplyFlag(const std::string& dest, LaunchOptions* options) {
  bool* flag = dest == "help"                           ? &options->show_help
               : dest == "help_env"                     ? &options->show_env_help
               : dest == "version"                      ? &options->show_version
               : dest == "check_build"                  ? &options->check_build
               : dest == "dry_run"                      ? &options->dry_run
               : dest == "verbose"                      ? &options->verbose
               : dest == "prefix_output_with_timestamp" ? &options->prefix_timestamps
                                                        : nullptr;
  if (flag != nullptr) *flag = true;
  return flag != nullptr;
}

// Applies the option `option` with its `values` (as many as it takes).
Status ApplyOption(const ResolvedOption& option, const std::vector<std::string>& values,
                   LaunchOptions* options, HorovodrunSettings* settings, bool* have_hosts) {
  const std::string dest = option.spec->dest;
  if (IsHorovodrunSetting(dest)) {
    (*settings)[dest] =
        Setting{values.empty() ? option.spec->flag_value : values[0], option.spelling};
    return Status::Ok();
  }
  if (values.empty()) {
    if (!ApplyFlag(dest, options))
      return InvalidArgument("unknown option '" + option.spelling + "'");
    return Status::Ok();
  }
  if (dest == "cooldown_range") {
    return ApplyCooldownRange(option.spelling, values[0], values[1], &options->elastic);
  }
  return ApplyValueOption(dest, option.spelling, values[0], options, have_hosts);
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

// Adds the --config-file's settings to the command line's (which win) and resolves them into
// what the ranks get; checks the output options.
Status ResolveHorovodrunSettings(HorovodrunSettings settings, LaunchOptions* options) {
  if (!options->output_dir.empty() && !options->output_filename.empty()) {
    return InvalidArgument("give one of --output-dir and --output-filename");
  }
  if (!options->config_file.empty()) {
    KOLO_ASSIGN_OR_RETURN(HorovodrunSettings from_file, ReadConfigFile(options->config_file));
    MergeConfigSettings(from_file, &settings);
  }
  KOLO_ASSIGN_OR_RETURN(options->rank_settings, ResolveSettings(settings, JsrunInstalled()));
  return Status::Ok();
}

}  // namespace

StatusOr<LaunchOptions> ParseLaunchOptions(const std::vector<std::string>& args) {
  LaunchOptions options;
  HorovodrunSettings settings;  // the command line's
  bool have_hosts = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    KOLO_ASSIGN_OR_RETURN(ResolvedOption option, ResolveOption(arg));
    std::vector<std::string> values;
    if (option.value.has_value()) {
      values.push_back(*option.value);
    } else {
      const auto count = static_cast<size_t>(option.spec->values);
      if (i + count >= args.size()) {
        return InvalidArgument(option.spelling +
                               (count == 2 ? " needs MIN and MAX seconds" : " needs a value"));
      }
      values.assign(args.begin() + static_cast<std::ptrdiff_t>(i + 1),
                    args.begin() + static_cast<std::ptrdiff_t>(i + 1 + count));
      i += count;
    }
    KOLO_RETURN_IF_ERROR(ApplyOption(option, values, &options, &settings, &have_hosts));
    if (options.show_help || options.show_env_help || options.show_version) return options;
  }
  options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  KOLO_RETURN_IF_ERROR(ResolveHorovodrunSettings(std::move(settings), &options));
  if (options.check_build) return options;  // as horovodrun -cb: no -np or program needed
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

}  // namespace kolo::launcher
