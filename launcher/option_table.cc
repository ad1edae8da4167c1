// kolorun's options and how a command-line word names one; see option_table.h.
#include "launcher/option_table.h"

#include <algorithm>

namespace kolo::launcher {
namespace {

constexpr const char* kTop = "";
constexpr const char* kSsh = "SSH arguments";
constexpr const char* kParams = "tuneable parameter arguments";
constexpr const char* kAutotune = "autotune arguments";
constexpr const char* kElastic = "elastic arguments";
constexpr const char* kTimeline = "timeline arguments";
constexpr const char* kStall = "stall check arguments";
constexpr const char* kLibrary = "library arguments";
constexpr const char* kLogging = "logging arguments";
constexpr const char* kHosts = "host arguments";
constexpr const char* kController = "controller arguments";

constexpr const char* kNoGloo =
    "no effect: kolo's own controller (gRPC, on rank 0) and its TCP ring and shared-memory data "
    "plane do what Gloo does for horovodrun";
constexpr const char* kNoBayes =
    "no effect: kolo's tuner climbs a doubling grid instead of Bayesian optimisation";
constexpr const char* kNoLogTime = "no effect: kolo's log lines always carry their time";

// Builders for the rows below: one of horovodrun's options, taking `values` words (its value's
// name for --help, or what the flag stores); kolo's own; and modifiers.
OptionSpec Row(const char* dest, std::vector<const char*> horovod, int values, const char* text,
               const char* group, const char* help) {
  return {dest, std::move(horovod), {}, values, text, group, help};
}
OptionSpec Flag(const char* dest, std::vector<const char*> horovod, const char* stores,
                const char* group, const char* help) {
  return Row(dest, std::move(horovod), 0, stores, group, help);
}
OptionSpec Value(const char* dest, std::vector<const char*> horovod, const char* name,
                 const char* group, const char* help) {
  return Row(dest, std::move(horovod), 1, name, group, help);
}
OptionSpec Pair(const char* dest, std::vector<const char*> horovod, const char* names,
                const char* group, const char* help) {
  return Row(dest, std::move(horovod), 2, names, group, help);
}
OptionSpec Kolo(const char* dest, std::vector<const char*> kolo, int values, const char* text) {
  return {dest, {}, std::move(kolo), values, text, nullptr, "kolo's own (UsageText)"};
}
OptionSpec Also(std::vector<const char*> kolo, OptionSpec spec) {  // kolo's other spellings
  spec.kolo = std::move(kolo);
  return spec;
}
OptionSpec Hidden(OptionSpec spec) {  // argparse.SUPPRESS: accepted, not in --help
  spec.hidden = true;
  return spec;
}

// kolo's own options, then horovodrun's ungrouped and SSH options.
std::vector<OptionSpec> LauncherRows() {
  return {
      // kolo's own options, described by UsageText().
      Kolo("help_env", {"--help-env"}, 0, "1"),
      Kolo("launch_cmd", {"--launch-cmd"}, 1, "TEMPLATE"),
      Kolo("rsh", {"--rsh"}, 1, "PROGRAM"),
      Kolo("forward_env", {"-x"}, 1, "NAME[=VALUE]"),
      Kolo("output_dir", {"--output-dir"}, 1, "DIR"),
      Kolo("bind_to", {"--bind-to"}, 1, "core|none"),
      Kolo("dry_run", {"--dry-run"}, 0, "1"),
      // horovodrun's options, in the order of parse_args() in horovod/runner/launch.py.
      Flag("help", {"-h", "--help"}, "1", kTop, "print this text and exit"),
      Flag("version", {"-v", "--version"}, "1", kTop, "print kolo's version and exit"),
      Also({"-n", "--np"}, Value("num_proc", {"-np", "--num-proc"}, "N", kTop,
                                 "number of ranks (kolo's -np); elastic: the ranks to start with")),
      Flag("check_build", {"-cb", "--check-build"}, "1", kTop,
           "print the frameworks, controllers and data planes of this kolo build, and exit"),
      Flag("disable_cache", {"--disable-cache"}, "1", kTop,
           "no effect: kolorun keeps no cache of start-up checks; it checks every time"),
      Value("start_timeout", {"--start-timeout"}, "S", kTop,
            "ranks fail init() when the job is not complete after S seconds "
            "(KOLO_START_TIMEOUT_SECONDS)"),
      Value("nics", {"--network-interfaces"}, "NICS", kTop,
            "no effect: each rank's data plane binds the interface that routes to the controller "
            "(KOLO_DATA_ADDR names another address)"),
      Value("nics", {"--network-interface"}, "NIC", kTop, "no effect: as --network-interfaces"),
      Value("output_filename", {"--output-filename"}, "DIR", kTop,
            "also write each rank's raw stdout and stderr to DIR/rank.N/stdout and "
            "DIR/rank.N/stderr (N zero-padded, as horovodrun lays them out)"),
      Flag("verbose", {"--verbose"}, "1", kTop,
           "print how each rank is started and the settings horovodrun options made, on stderr"),
      Value("config_file", {"--config-file"}, "FILE", kTop,
            "Horovod's YAML settings file; the command line wins over it, it wins over the "
            "environment; a key kolo does not know is an error"),
      Value("ssh_port", {"-p", "--ssh-port"}, "PORT", kSsh, "ssh port for remote hosts"),
      Also({"--ssh-identity"}, Value("ssh_identity_file", {"-i", "--ssh-identity-file"}, "FILE",
                                     kSsh, "ssh identity file for remote hosts")),
  };
}

// horovodrun's tuneable parameter, autotune, timeline and stall check options.
std::vector<OptionSpec> TuningRows() {
  return {
      Value("fusion_threshold_mb", {"--fusion-threshold-mb"}, "MB", kParams,
            "KOLO_FUSION_THRESHOLD: MB MiB, in bytes (0 disables fusion)"),
      Value("cycle_time_ms", {"--cycle-time-ms"}, "MS", kParams, "KOLO_CYCLE_TIME_MS"),
      Value("cache_capacity", {"--cache-capacity"}, "N", kParams, "KOLO_CACHE_CAPACITY"),
      Flag("hierarchical_allreduce", {"--hierarchical-allreduce"}, "1", kParams,
           "KOLO_HIERARCHICAL=on: hierarchical allreduces, allgathers, reducescatters, broadcasts"),
      Flag("hierarchical_allreduce", {"--no-hierarchical-allreduce"}, "0", kParams,
           "KOLO_HIERARCHICAL=off: flat rings and chains only"),
      Flag("hierarchical_allgather", {"--hierarchical-allgather"}, "1", kParams,
           "no effect: KOLO_HIERARCHICAL (--[no-]hierarchical-allreduce) decides for allreduces "
           "and allgathers together; by default allgathers of 64 KiB and more go hierarchically"),
      Flag("hierarchical_allgather", {"--no-hierarchical-allgather"}, "0", kParams,
           "no effect: KOLO_HIERARCHICAL (--no-hierarchical-allreduce) turns hierarchical "
           "allgathers off together with allreduces"),
      Flag("torus_allreduce", {"--torus-allreduce"}, "1", kParams,
           "no effect: kolo has no NCCL torus allreduce (--hierarchical-allreduce is its two-level "
           "allreduce)"),
      Flag("torus_allreduce", {"--no-torus-allreduce"}, "0", kParams,
           "no effect: kolo has no torus allreduce to turn off"),
      Flag("autotune", {"--autotune"}, "1", kAutotune, "KOLO_AUTOTUNE=1"),
      Hidden(Flag("autotune", {"--no-autotune"}, "0", kAutotune, "KOLO_AUTOTUNE=0")),
      Value("autotune_log_file", {"--autotune-log-file"}, "FILE", kAutotune, "KOLO_AUTOTUNE_LOG"),
      Value("autotune_warmup_samples", {"--autotune-warmup-samples"}, "N", kAutotune,
            "KOLO_AUTOTUNE_WARMUP_SAMPLES"),
      Value("autotune_steps_per_sample", {"--autotune-steps-per-sample"}, "N", kAutotune,
            "KOLO_AUTOTUNE_STEPS_PER_SAMPLE"),
      Value("autotune_bayes_opt_max_samples", {"--autotune-bayes-opt-max-samples"}, "N", kAutotune,
            kNoBayes),
      Value("autotune_gaussian_process_noise", {"--autotune-gaussian-process-noise"}, "F",
            kAutotune, kNoBayes),
      Value("timeline_filename", {"--timeline-filename"}, "FILE", kTimeline,
            "KOLO_TIMELINE: each rank writes FILE with .rankN before its extension (kolo-timeline "
            "merge joins them)"),
      Flag("timeline_mark_cycles", {"--timeline-mark-cycles"}, "1", kTimeline,
           "KOLO_TIMELINE_MARK_CYCLES=1"),
      Hidden(Flag("timeline_mark_cycles", {"--no-timeline-mark-cycles"}, "0", kTimeline,
                  "KOLO_TIMELINE_MARK_CYCLES=0")),
      Flag("no_stall_check", {"--no-stall-check"}, "1", kStall,
           "KOLO_STALL_CHECK_SECONDS=0: no stall warnings (the stall shutdown stays)"),
      Hidden(Flag("no_stall_check", {"--stall-check"}, "0", kStall,
                  "HOROVOD_STALL_CHECK_DISABLE=0: stall warnings stay on")),
      Value("stall_check_warning_time_seconds", {"--stall-check-warning-time-seconds"}, "S", kStall,
            "KOLO_STALL_CHECK_SECONDS"),
      Value("stall_check_shutdown_time_seconds", {"--stall-check-shutdown-time-seconds"}, "S",
            kStall, "KOLO_STALL_SHUTDOWN_SECONDS (0: never; kolo's default is 1800)"),
  };
}

// horovodrun's elastic, library, logging, host and controller options.
std::vector<OptionSpec> JobRows() {
  return {
      Value("min_num_proc", {"--min-np", "--min-num-proc"}, "N", kElastic,
            "elastic job: fewer ranks than N for --elastic-timeout ends it"),
      Value("max_num_proc", {"--max-np", "--max-num-proc"}, "N", kElastic,
            "elastic job: never more ranks than N"),
      Also({"--slots"}, Value("slots", {"--slots-per-host"}, "N", kElastic,
                              "slots of a discovered host whose line gives none (kolo's --slots)")),
      Value("elastic_timeout", {"--elastic-timeout"}, "S", kElastic,
            "how long an elastic job waits for --min-np ranks (default 600)"),
      Value("reset_limit", {"--reset-limit"}, "N", kElastic, "end after N re-formations"),
      Pair("cooldown_range", {"--blacklist-cooldown-range"}, "MIN MAX", kElastic,
           "a failed host may be used again after MIN to MAX seconds"),
      Flag("mpi_threads_disable", {"--mpi-threads-disable"}, "1", kLibrary,
           "no effect: kolo does not use MPI"),
      Hidden(Flag("mpi_threads_disable", {"--no-mpi-threads-disable"}, "0", kLibrary,
                  "no effect: kolo does not use MPI")),
      Value("mpi_args", {"--mpi-args"}, "ARGS", kLibrary,
            "no effect: kolorun starts the ranks itself, not through mpirun"),
      Flag("tcp_flag", {"--tcp"}, "1", kLibrary,
           "KOLO_TRANSPORT=tcp (the TCP ring, no shared memory) and NCCL_IB_DISABLE=1"),
      Value("binding_args", {"--binding-args"}, "ARGS", kLibrary,
            "no effect: mpirun's binding arguments; kolorun binds ranks with --bind-to core|none"),
      Value("num_nccl_streams", {"--num-nccl-streams"}, "N", kLibrary,
            "no effect: kolo runs its NCCL collectives on one stream per GPU"),
      Value("thread_affinity", {"--thread-affinity"}, "N", kLibrary,
            "no effect: kolo does not pin its background thread; --bind-to core binds whole ranks"),
      Value("gloo_timeout_seconds", {"--gloo-timeout-seconds"}, "S", kLibrary,
            "KOLO_TIMEOUT_SECONDS: kolo's deadline for data-plane progress and peers' liveness"),
      Value("log_level", {"--log-level"}, "LEVEL", kLogging,
            "KOLO_LOG_LEVEL, lower-cased (TRACE, DEBUG, INFO, WARNING, ERROR, FATAL)"),
      Hidden(Flag("log_with_timestamp", {"--log-with-timestamp"}, "1", kLogging, kNoLogTime)),
      Flag("log_with_timestamp", {"--log-without-timestamp"}, "0", kLogging, kNoLogTime),
      Flag("prefix_output_with_timestamp", {"-prefix-timestamp", "--prefix-output-with-timestamp"},
           "1", kLogging, "each forwarded output line starts with the time, as horovodrun's"),
      Hidden(Flag("log_with_timestamp", {"--log-hide-timestamp"}, "0", kLogging, kNoLogTime)),
      Hidden(Flag("log_with_timestamp", {"--no-log-hide-timestamp"}, "1", kLogging, kNoLogTime)),
      Also({"--host"}, Value("hosts", {"-H", "--hosts"}, "HOSTS", kHosts,
                             "hosts: NAME[=ADDR][:SLOTS],... (kolo's -H)")),
      Value("hostfile", {"-hostfile", "--hostfile"}, "FILE", kHosts,
            "hosts, one per line: NAME [slots=N] [address=ADDR]"),
      Value("host_discovery_script", {"--host-discovery-script"}, "PROGRAM", kHosts,
            "elastic job: a program printing the usable hosts, one HOST[:SLOTS] a line"),
      Flag("controller", {"--gloo"}, "gloo", kController, kNoGloo),
      Flag("controller", {"--mpi"}, "mpi", kController,
           "no effect: kolo has no MPI controller; its own (gRPC, on rank 0) runs the job (or run "
           "the program under mpirun itself: README, Running under mpirun)"),
      Flag("controller", {"--jsrun"}, "jsrun", kController,
           "an error where jsrun is not installed; else no effect: kolorun starts the ranks itself "
           "and does not read LSF's allocation (give -H or --hostfile)"),
  };
}

std::vector<const char*> AllSpellings(const OptionSpec& spec) {
  std::vector<const char*> all = spec.horovod;
  all.insert(all.end(), spec.kolo.begin(), spec.kolo.end());
  return all;
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

const OptionSpec* FindExact(const std::string& name) {
  for (const OptionSpec& spec : OptionTable()) {
    for (const char* spelling : AllSpellings(spec)) {
      if (name == spelling) return &spec;
    }
  }
  return nullptr;
}

// `spelling` given `value` in the same word: only an option that takes one value may be.
Status CheckInlineValue(const OptionSpec& spec, const std::string& spelling) {
  if (spec.values == 0) return InvalidArgument(spelling + " takes no value");
  if (spec.values == 2) {
    return InvalidArgument(spelling + " takes two values: " + spelling + " " + spec.flag_value);
  }
  return Status::Ok();
}

// argparse's abbreviations: `name` a prefix of --long spellings of exactly one option.
StatusOr<ResolvedOption> ResolvePrefix(const std::string& name) {
  std::vector<std::pair<const OptionSpec*, const char*>> matches;
  for (const OptionSpec& spec : OptionTable()) {
    for (const char* spelling : AllSpellings(spec)) {
      if (StartsWith(spelling, "--") && StartsWith(spelling, name)) {
        matches.emplace_back(&spec, spelling);
        break;
      }
    }
  }
  if (matches.empty()) return InvalidArgument("unknown option '" + name + "'");
  if (matches.size() > 1) {
    std::string names;
    for (const auto& [spec, spelling] : matches)
      names += (names.empty() ? "" : ", ") + std::string(spelling);
    return InvalidArgument("ambiguous option '" + name + "': could match " + names);
  }
  ResolvedOption resolved;
  resolved.spec = matches.front().first;
  resolved.spelling = matches.front().second;
  return resolved;
}

// `text` wrapped to lines of at most `width` characters, each after `indent` spaces.
std::string Wrap(const std::string& text, size_t indent, size_t width) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + std::string(indent, ' ') + line + "\n";
}

std::vector<OptionSpec> BuildTable() {
  std::vector<OptionSpec> table = LauncherRows();
  for (std::vector<OptionSpec> rows : {TuningRows(), JobRows()}) {
    table.insert(table.end(), rows.begin(), rows.end());
  }
  return table;
}

}  // namespace

const std::vector<OptionSpec>& OptionTable() {
  static const std::vector<OptionSpec> table = BuildTable();
  return table;
}

const std::vector<const char*>& HorovodrunGroups() {
  static const std::vector<const char*> groups = {kTop,     kSsh,      kParams,    kAutotune,
                                                  kElastic, kTimeline, kStall,     kLibrary,
                                                  kLogging, kHosts,    kController};
  return groups;
}

StatusOr<ResolvedOption> ResolveOption(const std::string& word) {
  ResolvedOption resolved;
  if (const OptionSpec* spec = FindExact(word)) {
    resolved.spec = spec;
    resolved.spelling = word;
    return resolved;
  }
  const size_t eq = word.find('=');
  const std::string name = word.substr(0, eq);
  if (eq != std::string::npos) {
    if (const OptionSpec* spec = FindExact(name)) {
      KOLO_RETURN_IF_ERROR(CheckInlineValue(*spec, name));
      resolved = {spec, name, word.substr(eq + 1)};
      return resolved;
    }
  }
  // -p2222, -i~/.ssh/key, -Hnode1:4: a one-letter option and its value in one word.
  if (word.size() > 2 && word[1] != '-') {
    const OptionSpec* spec = FindExact(word.substr(0, 2));
    if (spec != nullptr && spec->values == 1) {
      resolved = {spec, word.substr(0, 2), word.substr(2)};
      return resolved;
    }
  }
  if (!StartsWith(word, "--")) return InvalidArgument("unknown option '" + word + "'");
  KOLO_ASSIGN_OR_RETURN(resolved, ResolvePrefix(name));
  if (eq != std::string::npos) {
    KOLO_RETURN_IF_ERROR(CheckInlineValue(*resolved.spec, resolved.spelling));
    resolved.value = word.substr(eq + 1);
  }
  return resolved;
}

std::string FormatHorovodrunGroups() {
  constexpr size_t kColumn = 24, kWidth = 96;
  std::string out;
  for (const char* group : HorovodrunGroups()) {
    out += std::string("\nhorovodrun's ") + (*group ? group : "options") + ":\n";
    for (const OptionSpec& spec : OptionTable()) {
      if (spec.group == nullptr || std::string(spec.group) != group || spec.hidden) continue;
      std::string names;
      for (const char* spelling : spec.horovod) {
        names += (names.empty() ? "" : ", ") + std::string(spelling);
        if (spec.values > 0) names += std::string(" ") + spec.flag_value;
      }
      names = "  " + names;
      const bool same_line = names.size() + 2 <= kColumn;
      if (same_line) names.resize(kColumn, ' ');
      out += same_line ? names : names + "\n";
      const std::string help = Wrap(spec.help, kColumn, kWidth);
      out += same_line ? help.substr(kColumn) : help;
    }
  }
  return out;
}

}  // namespace kolo::launcher
