// Flag parsing for kolo-bench; see bench_options.h.
#include "tools/bench/bench_options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>

#include "core/config/config_table.h"

namespace kolo::bench {
namespace {

constexpr int64_t kMaxBytes = int64_t{1} << 40;

const std::vector<std::pair<std::string, DataType>>& TypeNames() {
  static const std::vector<std::pair<std::string, DataType>> kNames = {
      {"uint8", DataType::kUInt8},   {"int8", DataType::kInt8},
      {"int32", DataType::kInt32},   {"int64", DataType::kInt64},
      {"half", DataType::kFloat16},  {"bfloat16", DataType::kBFloat16},
      {"float", DataType::kFloat32}, {"double", DataType::kFloat64},
      {"uint16", DataType::kUInt16}, {"int16", DataType::kInt16},
      {"bool", DataType::kBool},
  };
  return kNames;
}

const std::vector<std::pair<std::string, ReduceOp>>& OpNames() {
  static const std::vector<std::pair<std::string, ReduceOp>> kNames = {
      {"sum", ReduceOp::kSum}, {"prod", ReduceOp::kProduct}, {"min", ReduceOp::kMin},
      {"max", ReduceOp::kMax}, {"avg", ReduceOp::kAverage},
  };
  return kNames;
}

// The collectives -o names besides the reduce ops (which mean allreduce); reducescatter sums.
const std::vector<std::pair<std::string, Collective>>& CollectiveNames() {
  static const std::vector<std::pair<std::string, Collective>> kNames = {
      {"allgather", Collective::kAllgather},
      {"broadcast", Collective::kBroadcast},
      {"reducescatter", Collective::kReducescatter},
      {"alltoall", Collective::kAlltoall},
  };
  return kNames;
}

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t lo,
                           int64_t hi) {
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  bool digits_first = !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) ||
                                        (text[0] == '-' && text.size() > 1));
  if (!digits_first || errno != 0 || *end != '\0' || value < lo || value > hi) {
    return InvalidArgument(flag + " must be an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got '" + text + "'");
  }
  return static_cast<int64_t>(value);
}

// Looks `text` up in `names` ("all" selects every entry); also accepts kolo's own names.
template <typename T>
StatusOr<std::vector<T>> ParseChoice(const std::string& flag, const std::string& text,
                                     const std::vector<std::pair<std::string, T>>& names,
                                     const std::map<std::string, T>& aliases) {
  std::vector<T> chosen;
  if (text == "all") {
    for (const auto& entry : names) chosen.push_back(entry.second);
    return chosen;
  }
  for (const auto& entry : names) {
    if (entry.first == text) return std::vector<T>{entry.second};
  }
  auto alias = aliases.find(text);
  if (alias != aliases.end()) return std::vector<T>{alias->second};
  std::string valid;
  for (const auto& entry : names) valid += entry.first + " ";
  return InvalidArgument(flag + ": unknown value '" + text + "' (one of: " + valid + "all)");
}

using FlagSetter = std::function<Status(const std::string&, BenchOptions*)>;

// Stores an integer-valued flag into `field` after a range check.
template <typename Field>
FlagSetter IntFlag(const std::string& flag, Field BenchOptions::*field, int64_t lo, int64_t hi) {
  return [=](const std::string& value, BenchOptions* options) -> Status {
    KOLO_ASSIGN_OR_RETURN(int64_t parsed, ParseInt(flag, value, lo, hi));
    options->*field = static_cast<Field>(parsed);
    return Status::Ok();
  };
}

FlagSetter SizeFlag(const std::string& flag, int64_t BenchOptions::*field) {
  return [=](const std::string& value, BenchOptions* options) -> Status {
    StatusOr<int64_t> parsed = kolo::ParseByteSize(value);
    if (!parsed.ok()) return parsed.status().WithContext(flag);
    if (parsed.value() > kMaxBytes) return InvalidArgument(flag + ": '" + value + "' is over 1T");
    options->*field = parsed.value();
    return Status::Ok();
  };
}

// Every flag, by its short and long spelling.
const std::map<std::string, FlagSetter>& Flags() {
  static const std::map<std::string, FlagSetter> kFlags = [] {
    std::map<std::string, FlagSetter> flags;
    auto add = [&flags](const std::string& s, const std::string& l, FlagSetter setter) {
      flags[s] = setter;
      flags[l] = setter;
    };
    add("-b", "--minbytes", SizeFlag("--minbytes", &BenchOptions::min_bytes));
    add("-e", "--maxbytes", SizeFlag("--maxbytes", &BenchOptions::max_bytes));
    add("-f", "--stepfactor", IntFlag("--stepfactor", &BenchOptions::step_factor, 2, 1 << 20));
    add("-n", "--iters", IntFlag("--iters", &BenchOptions::iters, 1, 1 << 24));
    add("-w", "--warmup_iters", IntFlag("--warmup_iters", &BenchOptions::warmup_iters, 0, 1 << 24));
    add("-c", "--check", IntFlag("--check", &BenchOptions::check, 0, 1));
    add("-d", "--datatype", [](const std::string& v, BenchOptions* o) -> Status {
      KOLO_ASSIGN_OR_RETURN(o->dtypes, ParseChoice<DataType>("--datatype", v, TypeNames(),
                                                             {{"float32", DataType::kFloat32},
                                                              {"float16", DataType::kFloat16},
                                                              {"float64", DataType::kFloat64},
                                                              {"bf16", DataType::kBFloat16}}));
      return Status::Ok();
    });
    add("-r", "--root", IntFlag("--root", &BenchOptions::root, 0, 1 << 20));
    add("-m", "--model", [](const std::string& v, BenchOptions* o) -> Status {
      if (v != "resnet50")
        return InvalidArgument("--model: unknown model '" + v + "' (one of: resnet50)");
      o->model = v;
      return Status::Ok();
    });
    add("--pingpong", "--pingpong", [](const std::string& v, BenchOptions* o) -> Status {
      if (v != "0" && v != "1")
        return InvalidArgument("--pingpong must be 0 or 1, got '" + v + "'");
      o->pingpong = v == "1";
      return Status::Ok();
    });
    add("--device", "--device", [](const std::string& v, BenchOptions* o) -> Status {
      if (v != "cpu" && v != "cuda" && v != "cuda-sim") {
        return InvalidArgument("--device: unknown value '" + v + "' (one of: cpu cuda cuda-sim)");
      }
      o->device = v;
      return Status::Ok();
    });
    add("--raw", "--raw", IntFlag("--raw", &BenchOptions::raw, 0, 1));
    add("--inplace", "--inplace", IntFlag("--inplace", &BenchOptions::inplace, 0, 1));
    add("--barrier", "--barrier", IntFlag("--barrier", &BenchOptions::barrier, 0, 1));
    add("--set", "--set", IntFlag("--set", &BenchOptions::set_ranks, 2, 1 << 20));
    add("--busy", "--busy", IntFlag("--busy", &BenchOptions::busy, 0, 256));
    add("--stat", "--stat", [](const std::string& v, BenchOptions* o) -> Status {
      if (v != "mean" && v != "median") {
        return InvalidArgument("--stat: unknown value '" + v + "' (one of: mean median)");
      }
      o->median = v == "median";
      return Status::Ok();
    });
    add("-o", "--op", [](const std::string& v, BenchOptions* o) -> Status {
      for (const auto& [name, collective] : CollectiveNames()) {
        if (v == name) {
          o->ops = {BenchOp{collective, ReduceOp::kSum}};
          return Status::Ok();
        }
      }
      auto parsed = ParseChoice<ReduceOp>(
          "--op", v, OpNames(), {{"product", ReduceOp::kProduct}, {"average", ReduceOp::kAverage}});
      if (!parsed.ok()) {
        return InvalidArgument("--op: unknown value '" + v +
                               "' (one of: sum prod min max avg all allgather broadcast "
                               "reducescatter alltoall)");
      }
      o->ops.clear();
      for (ReduceOp op : parsed.value()) o->ops.push_back({Collective::kAllreduce, op});
      return Status::Ok();
    });
    return flags;
  }();
  return kFlags;
}

}  // namespace

StatusOr<BenchOptions> ParseBenchOptions(const std::vector<std::string>& args) {
  BenchOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    if (flag == "-h" || flag == "--help") {
      options.show_help = true;
      return options;
    }
    std::string value;
    bool inline_value = false;
    size_t eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    auto it = Flags().find(flag);
    if (it == Flags().end()) return InvalidArgument("unknown argument '" + args[i] + "'");
    if (!inline_value) {
      if (i + 1 >= args.size()) return InvalidArgument(flag + " needs a value");
      value = args[++i];
    }
    KOLO_RETURN_IF_ERROR(it->second(value, &options));
  }
  if (options.raw &&
      !(options.ops.size() == 1 && options.ops[0].collective == Collective::kAllreduce &&
        options.ops[0].reduce == ReduceOp::kSum)) {
    return InvalidArgument("--raw runs allreduce sums only (-o sum)");
  }
  if (options.inplace && !options.raw &&
      !std::all_of(options.ops.begin(), options.ops.end(),
                   [](const BenchOp& op) { return op.collective == Collective::kAllreduce; })) {
    return InvalidArgument(
        "--inplace applies to allreduce only (broadcast always runs in place; the other "
        "collectives' outputs differ from their inputs in size)");
  }
  if (options.device != "cpu" && options.raw) {
    return InvalidArgument("--raw runs on host memory only (--device cpu)");
  }
  if (options.set_ranks > 0 && (options.raw || options.device != "cpu" || !options.model.empty())) {
    return InvalidArgument(
        "--set runs the sweep's collectives in a process set: not with --raw (the data plane "
        "alone has no sets), --model, or GPU tensors (process sets are CPU only)");
  }
  if (options.min_bytes > options.max_bytes) {
    return InvalidArgument("--minbytes (" + std::to_string(options.min_bytes) +
                           ") is larger than --maxbytes (" + std::to_string(options.max_bytes) +
                           ")");
  }
  return options;
}

std::vector<int64_t> SweepSizes(const BenchOptions& options) {
  std::vector<int64_t> sizes;
  int64_t size = options.min_bytes;
  while (size <= options.max_bytes) {
    sizes.push_back(size);
    if (size == 0) {
      size = 1;
    } else if (size > options.max_bytes / options.step_factor) {
      break;  // the next step would pass max_bytes (or overflow)
    } else {
      size *= options.step_factor;
    }
  }
  return sizes;
}

std::string BenchTypeName(DataType dtype) {
  for (const auto& [name, value] : TypeNames()) {
    if (value == dtype) return name;
  }
  return DataTypeName(dtype);
}

std::string BenchOpName(ReduceOp op) {
  for (const auto& [name, value] : OpNames()) {
    if (value == op) return name;
  }
  return ReduceOpName(op);
}

std::string BenchUsage() {
  return R"(Usage: kolorun -np N kolo-bench [flags]
Collective sweep through kolo's public API, printed by rank 0 in the style of nccl-tests.

  -b, --minbytes SIZE      smallest message (default 8); sizes take K, M, G suffixes
  -e, --maxbytes SIZE      largest message (default 64M)
  -f, --stepfactor F       multiply the size by F between steps (default 2)
  -n, --iters N            timed iterations per size (default 20)
  -w, --warmup_iters N     untimed iterations first (default 5)
  -d, --datatype T         uint8 int8 uint16 int16 int32 int64 half bfloat16 float double bool,
                           or all (default float; bool skips avg, which it does not have)
  -o, --op OP              allreduce with sum prod min max avg, or all of them (default sum);
                           or allgather, broadcast, reducescatter (which sums), alltoall
  -r, --root N             broadcast's root rank (default 0)
  -c, --check 0|1          check every iteration's result exactly (default 1)
      --stat mean|median   what the time column reports over the iterations (default mean)
      --device D           where the tensors live: cpu (default), cuda (the local rank's GPU)
                           or cuda-sim (a simulated GPU per rank: kolo's whole GPU path on a
                           machine without one; times are the simulator's, not a GPU's)
      --raw 0|1            allreduce sums through the data plane alone, in place: no queue,
                           negotiation or fusion (default 0); only with -o sum
      --inplace 0|1        allreduce in place: the output is the input tensor, refilled
                           untimed before each iteration, as MPI_IN_PLACE peers are timed
                           (default 0: out of place); allreduce only
      --barrier 0|1        an untimed barrier before every timed iteration, so that the ranks
                           start each timed op together, as the MPI and Gloo benchmarks time
                           theirs (default 0: back to back, a rank's wait for a late peer
                           counts)
      --set N              run the sweep in a process set of ranks 0 .. N-1 (2 <= N <= the
                           job's ranks; the others wait in a barrier of the job): its own
                           shared memory on one host, as torch.distributed's sub-groups and
                           Horovod's process sets run
      --busy N             N busy processes beside the ranks for the run (default 0): each
                           host's first rank starts them after init, unbound, each spinning in
                           user space as `yes >/dev/null` does (tools/bench/busy.sh runs the
                           peers' benchmarks the same way; docs/PERFORMANCE.md, "On a busy
                           machine")
  -m, --model resnet50     instead of the sweep: a training step of the model's gradients (each
                           its own allreduce, last layer first, waited for together) against one
                           raw allreduce of the same bytes through the data plane alone, which
                           skips the queue, negotiation and fusion; prints both and their ratio
                           (on a GPU, --device cuda or cuda-sim: the step alone, since the raw
                           data plane runs on host memory)
      --pingpong 0|1       instead of the sweep: point-to-point (kolo/p2p.h) between ranks
                           0 and 1 over the sizes: one-way latency (half a send and its echo,
                           median; the echo is checked) and streaming bandwidth (16 sends in
                           flight, then a one-byte reply), as OSU's osu_latency and osu_bw time
                           MPI (tools/bench/mpi_p2p_bench.cc)
  -h, --help               print this text

Columns, as in nccl-tests (n ranks, e bytes per element, SIZE from -b/-e/-f):
  count    allreduce, broadcast: SIZE / e elements.  allgather, reducescatter: SIZE / e / n
           (rounded down), the elements per rank: allgather's input and reducescatter's output.
           alltoall: SIZE / e / n (rounded down), the elements sent to each rank
  size     bytes of the op's largest buffer: count * e for allreduce and broadcast, count * n * e
           for allgather (its output), reducescatter (its input) and alltoall (either buffer)
  redop    the reduce op; none for allgather, alltoall and broadcast
  root     broadcast's root; -1 otherwise
  time     mean (or --stat median) over iterations of the slowest rank's time
  algbw    size / time
  busbw    algbw * 2 (n - 1) / n for allreduce, (n - 1) / n for allgather, alltoall and
           reducescatter, 1 for broadcast
  #wrong   wrong elements over all ranks and iterations (every result is checked exactly)
kolo-bench exits 1 if any element is wrong and 2 on a bad flag.
)";
}

}  // namespace kolo::bench
