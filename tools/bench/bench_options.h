// BenchOptions: kolo-bench's command line, in the style of nccl-tests (-b -e -f -n -w -d -o -r
// -c).
// Parsing is a pure function so that tests can drive it; the program prints what it returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "kolo/types.h"
#include "tools/bench/bench_collective.h"

namespace kolo::bench {

struct BenchOptions {
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{64} << 20;
  int64_t step_factor = 2;
  int iters = 20;
  int warmup_iters = 5;
  std::vector<DataType> dtypes = {DataType::kFloat32};
  // -o: allreduce with a reduce op ("all": every reduce op), or one other collective.
  std::vector<BenchOp> ops = {BenchOp{}};
  int root = 0;  // broadcast's root
  bool check = true;
  // --stat: what the time column reports over the iterations (nccl-tests: the mean).
  bool median = false;
  // --raw: allreduce sums through the data plane alone (runtime/raw_data_plane.h), in place,
  // without the queue, negotiation or fusion: the runtime's overhead is the difference.
  bool raw = false;
  // --inplace: allreduce writes its result over its input (input.data == output.data), the
  // way MPI_IN_PLACE peers are timed; the input is refilled, untimed, before each iteration.
  bool inplace = false;
  // --barrier: an untimed barrier before every timed iteration, so that the ranks start each
  // timed op together, as the peers' benchmarks (../shared/bench) time theirs.
  bool barrier = false;
  // --set: the sweep runs in a process set of job ranks 0 .. set_ranks - 1 (its ranks are then
  // theirs), the other ranks only join and leave; 0: in the global set.
  int set_ranks = 0;
  // --busy: N busy processes beside the ranks for the run (tools/bench/busy_load.h), started
  // by each host's local rank 0 after init; 0: none.
  int busy = 0;
  // --model: instead of the sweep, a training step of this model's gradients against one raw
  // data-plane allreduce of the same bytes (tools/bench/model_bench.h).
  std::string model;
  // --pingpong: instead of the sweep, point-to-point between ranks 0 and 1 over the sizes
  // (tools/bench/p2p_bench.h).
  bool pingpong = false;
  // --device: where the tensors live: cpu, cuda (this rank's GPU, local rank modulo the GPUs),
  // or cuda-sim (a simulated GPU per rank: the whole GPU path without a GPU).
  std::string device = "cpu";
  bool show_help = false;
};

// Parses the arguments after argv[0]. Each flag takes a value as "-b 4K", "--minbytes 4K" or
// "--minbytes=4K". Fails with kInvalidArgument naming the flag.
StatusOr<BenchOptions> ParseBenchOptions(const std::vector<std::string>& args);

// The message sizes of the sweep, in bytes: min, min*factor, ... up to max inclusive.
std::vector<int64_t> SweepSizes(const BenchOptions& options);

// nccl-tests' names: "float", "half", "bfloat16", "double", "int32", ...; and "sum", "prod",
// "min", "max", "avg".
std::string BenchTypeName(DataType dtype);
std::string BenchOpName(ReduceOp op);

std::string BenchUsage();

}  // namespace kolo::bench
