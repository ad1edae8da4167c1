// Parsing of kolo-timeline's command line and its help texts; see timeline_options.h.
#include "tools/timeline/timeline_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace kolo::timeline {
namespace {

constexpr int kMaxSteps = 1000;

StatusOr<Command> ParseCommandName(const std::string& name) {
  if (name == "merge") return Command::kMerge;
  if (name == "summary") return Command::kSummary;
  if (name == "plot") return Command::kPlot;
  return InvalidArgument("unknown command '" + name + "' (expected merge, summary or plot)");
}

StatusOr<double> ParsePositiveNumber(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || text[0] == ' ' || *end != '\0' || errno != 0 || !std::isfinite(value) ||
      value <= 0) {
    return InvalidArgument(flag + " must be a positive number of milliseconds, got '" + text + "'");
  }
  return value;
}

StatusOr<int> ParseStepCount(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || value < 1 ||
      value > kMaxSteps) {
    return InvalidArgument(flag + " must be an integer in [1, " + std::to_string(kMaxSteps) +
                           "], got '" + text + "'");
  }
  return static_cast<int>(value);
}

// Splits "--flag=value"; `value` is set only when there is an '='.
std::string FlagName(const std::string& arg, std::string* value, bool* has_value) {
  const size_t equals = arg.find('=');
  *has_value = arg.compare(0, 2, "--") == 0 && equals != std::string::npos;
  if (!*has_value) return arg;
  *value = arg.substr(equals + 1);
  return arg.substr(0, equals);
}

// Applies one option of `options.command`; `*i` is advanced past a separate value.
Status ApplyOption(const std::vector<std::string>& args, size_t* i, TimelineOptions* options) {
  std::string value;
  bool has_value = false;
  const std::string flag = FlagName(args[*i], &value, &has_value);
  const Command command = options->command;
  const bool takes_value =
      ((flag == "-o" || flag == "--output") && command != Command::kSummary) ||
      ((flag == "--last-ms" || flag == "--steps") && command == Command::kPlot);
  if (flag == "--json" && command == Command::kSummary && !has_value) {
    options->json = true;
    return Status::Ok();
  }
  if (!takes_value) {
    return InvalidArgument("unknown option '" + args[*i] + "' for " + CommandName(command));
  }
  if (!has_value) {
    if (*i + 1 >= args.size()) return InvalidArgument(flag + " needs a value");
    value = args[++*i];
  }
  if (flag == "-o" || flag == "--output") {
    if (value.empty()) return InvalidArgument(flag + " needs a file name");
    options->output = value;
  } else if (flag == "--last-ms") {
    KOLO_ASSIGN_OR_RETURN(double last_ms, ParsePositiveNumber(flag, value));
    options->last_ms = last_ms;
  } else {
    KOLO_ASSIGN_OR_RETURN(int steps, ParseStepCount(flag, value));
    options->steps = steps;
  }
  return Status::Ok();
}

constexpr const char kMergeUsage[] = R"(Usage: kolo-timeline merge -o OUT.json TRACE...

Combines the per-rank trace files of one job (trace.rank0.json, trace.rank1.json, ...; merged
files work too) into one Chrome trace-event JSON array for Perfetto or chrome://tracing.
  - Each file's ts are shifted by its start_unix_us minus the earliest one, so all ranks
    share one time axis (exact on one host; across hosts as good as NTP).
  - tids are renumbered 1, 2, ... so that no two tracks share one.
  - A file cut short by a killed process (no closing ']', a truncated last line) is read up
    to the damage, with a warning.
The output is written to OUT.json.tmp and renamed, so a failed merge leaves no partial file.

Options:
  -o, --output FILE   where to write the merged trace ("-" for stdout; required)
  -h, --help          print this text

Exit status: 0 done, 1 an input is unusable (the message names the file and line), 2 usage.
)";

constexpr const char kSummaryUsage[] = R"(Usage: kolo-timeline summary [--json] TRACE...

Prints tables about a run, from the per-rank trace files or a merged one:
  - per tensor: negotiations, mean/max negotiation wait (NEGOTIATE_* begin to end) and
    which rank announced last how often (the end event's last_rank, else the last tick);
  - stragglers: per rank, how often it was last and the wait of those negotiations;
  - per rank: wall time in QUEUE, copies in and out (MEMCPY_*_FUSION_BUFFER, COPY_INPUT,
    SCALE_OUTPUT), transfer (<ALGO>_<OP>: RING_ALLREDUCE, NCCL_ALLREDUCE, ...), CALLBACK and
    other work, where
    spans that overlap count once (fused phases repeat on every member's track), and the
    copies / transfer shares;
  - bytes moved (args.bytes of the op spans that ended OK) and bandwidth = bytes / transfer
    time (algorithm bandwidth, like nccl-tests' algbw);
  - fusion: how many responses carried 1, 2, ... tensors (group_size per fused_group);
  - overlap per step (steps as plot finds them: bursts of ops between idle gaps), per rank:
    the share of its copies and transfer that ran before its last enqueue of the step, i.e.
    while the work producing its ops (a backward pass handing over gradients) still ran,
    and the tail from that last enqueue to the end of its last op of the step.
Warnings (dropped events, truncated files, spans that never ended) go to stderr.

Options:
  --json       print the same numbers as one JSON object (base units: us, bytes, bytes/s)
  -h, --help   print this text

Exit status: 0 done, 1 an input is unusable (the message names the file and line), 2 usage.
)";

constexpr const char kPlotUsage[] =
    R"(Usage: kolo-timeline plot -o OUT.svg [--steps K | --last-ms N] TRACE...

Draws a Gantt chart of the end of the run as an SVG file (SVG 1.1, no scripts; any browser):
one row per rank; its upper lane shows negotiation wait (QUEUE), its lower lane fusion-buffer
copies, transfer, callbacks and other work; light grey is idle. A red mark on a rank's row
shows where it was the last to announce a tensor (hover for the tensor and the wait).

Which part is drawn:
  default        the last 3 steps. A step is a burst of op spans: the time where some rank
                 has an op in flight, split at idle gaps of at least half the longest gap
                 among the last 64 (the compute phase between two bursts of allreduces).
  --steps K      the last K steps instead (1..1000)
  --last-ms N    simply the last N milliseconds of the trace
A trace without op spans shows its last 200 ms.

Options:
  -o, --output FILE   where to write the SVG ("-" for stdout; required)
  -h, --help          print this text

Exit status: 0 done, 1 an input is unusable (the message names the file and line), 2 usage.
)";

constexpr const char kOverviewUsage[] = R"(Usage: kolo-timeline COMMAND [OPTIONS] TRACE...
       kolo-timeline help COMMAND | COMMAND --help

Reads the traces that KOLO_TIMELINE=trace.json writes (trace.rank0.json, trace.rank1.json,
...; format in docs/TIMELINE.md). Every command takes the per-rank files or a merged file.

Commands:
  merge     combine per-rank files into one trace for Perfetto / chrome://tracing
  summary   negotiation waits and stragglers, time per phase, bandwidth, fusion (--json)
  plot      an SVG Gantt chart of the last steps, one row per rank

Exit status: 0 done, 1 an input is unusable, 2 usage error.
)";

}  // namespace

const char* CommandName(Command command) {
  switch (command) {
    case Command::kMerge:
      return "merge";
    case Command::kSummary:
      return "summary";
    case Command::kPlot:
      return "plot";
    case Command::kNone:
      break;
  }
  return "kolo-timeline";
}

StatusOr<TimelineOptions> ParseTimelineOptions(const std::vector<std::string>& args) {
  TimelineOptions options;
  if (args.empty()) return InvalidArgument("missing a command (merge, summary or plot)");
  if (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    options.show_help = true;
    if (args.size() > 1 && args[0] == "help") {
      KOLO_ASSIGN_OR_RETURN(Command command, ParseCommandName(args[1]));
      options.command = command;
    }
    return options;
  }
  KOLO_ASSIGN_OR_RETURN(Command command, ParseCommandName(args[0]));
  options.command = command;
  bool seen_last_ms = false;
  bool seen_steps = false;
  bool options_ended = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_ended || arg.empty() || arg[0] != '-' || arg == "-") {
      options.files.push_back(arg);
    } else if (arg == "--") {
      options_ended = true;
    } else if (arg == "-h" || arg == "--help") {
      options.show_help = true;
      return options;
    } else {
      seen_last_ms = seen_last_ms || arg.compare(0, 9, "--last-ms") == 0;
      seen_steps = seen_steps || arg.compare(0, 7, "--steps") == 0;
      KOLO_RETURN_IF_ERROR(ApplyOption(args, &i, &options));
    }
  }
  if (seen_last_ms && seen_steps) return InvalidArgument("give --last-ms or --steps, not both");
  if (options.files.empty()) return InvalidArgument("missing the trace files to read");
  if (options.command != Command::kSummary && options.output.empty()) {
    return InvalidArgument(std::string("missing -o OUTPUT (where ") + CommandName(options.command) +
                           " writes its result)");
  }
  return options;
}

std::string UsageText(Command command) {
  switch (command) {
    case Command::kMerge:
      return kMergeUsage;
    case Command::kSummary:
      return kSummaryUsage;
    case Command::kPlot:
      return kPlotUsage;
    case Command::kNone:
      break;
  }
  return kOverviewUsage;
}

}  // namespace kolo::timeline
