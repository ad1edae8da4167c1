// Unit tests of kolo-bench's flag parsing and size sweep (kolo_bench_lib).
#include "tools/bench/bench_options.h"

#include <catch2/catch.hpp>

namespace kolo::bench {
namespace {

TEST_CASE("ParseBenchOptions has nccl-tests' defaults", "[tools][bench]") {
  auto options = ParseBenchOptions({});
  REQUIRE(options.ok());
  CHECK(options->min_bytes == 8);
  CHECK(options->max_bytes == 64 << 20);
  CHECK(options->step_factor == 2);
  CHECK(options->iters == 20);
  CHECK(options->warmup_iters == 5);
  CHECK(options->dtypes == std::vector<DataType>{DataType::kFloat32});
  CHECK(options->ops == std::vector<BenchOp>{{Collective::kAllreduce, ReduceOp::kSum}});
  CHECK(options->root == 0);
  CHECK(options->check);
}

TEST_CASE("ParseBenchOptions takes short, long and --flag=value forms", "[tools][bench]") {
  auto options = ParseBenchOptions({"-b", "4K", "--maxbytes=4M", "-f", "4", "--iters", "3", "-w",
                                    "0", "-d", "bfloat16", "--op=avg", "-c", "0"});
  REQUIRE(options.ok());
  CHECK(options->min_bytes == 4096);
  CHECK(options->max_bytes == 4 << 20);
  CHECK(options->step_factor == 4);
  CHECK(options->iters == 3);
  CHECK(options->warmup_iters == 0);
  CHECK(options->dtypes == std::vector<DataType>{DataType::kBFloat16});
  CHECK(options->ops == std::vector<BenchOp>{{Collective::kAllreduce, ReduceOp::kAverage}});
  CHECK_FALSE(options->check);
}

TEST_CASE("ParseBenchOptions expands 'all' to every dtype and op", "[tools][bench]") {
  auto options = ParseBenchOptions({"-d", "all", "-o", "all"});
  REQUIRE(options.ok());
  CHECK(options->dtypes.size() == 11);
  REQUIRE(options->ops.size() == 5);
  for (const BenchOp& op : options->ops) CHECK(op.collective == Collective::kAllreduce);
  CHECK(options->ops[1] == BenchOp{Collective::kAllreduce, ReduceOp::kProduct});
}

TEST_CASE("ParseBenchOptions takes allgather, broadcast, reducescatter and alltoall for -o",
          "[tools][bench]") {
  using Case = std::pair<std::string, Collective>;
  auto [name, collective] = GENERATE(
      Case{"allgather", Collective::kAllgather}, Case{"broadcast", Collective::kBroadcast},
      Case{"reducescatter", Collective::kReducescatter}, Case{"alltoall", Collective::kAlltoall});
  auto options = ParseBenchOptions({"-o", name});
  REQUIRE(options.ok());
  // Reducescatter sums; allgather, alltoall and broadcast carry no reduce op ("none").
  CHECK(options->ops == std::vector<BenchOp>{{collective, ReduceOp::kSum}});
  CHECK(RedopName(options->ops[0]) == (collective == Collective::kReducescatter ? "sum" : "none"));
  CHECK(CollectiveName(collective) == name);
}

TEST_CASE("ParseBenchOptions takes broadcast's root", "[tools][bench]") {
  auto options = ParseBenchOptions({"-o", "broadcast", "-r", "2"});
  REQUIRE(options.ok());
  CHECK(options->root == 2);
  options = ParseBenchOptions({"--root=5"});
  REQUIRE(options.ok());
  CHECK(options->root == 5);
  CHECK(options->ops == std::vector<BenchOp>{BenchOp{}});
}

TEST_CASE("ParseBenchOptions takes --model and --stat", "[tools][bench]") {
  auto options = ParseBenchOptions({"--model", "resnet50", "--stat", "median"});
  REQUIRE(options.ok());
  CHECK(options->model == "resnet50");
  CHECK(options->median);
  options = ParseBenchOptions({});
  REQUIRE(options.ok());
  CHECK(options->model.empty());
  CHECK_FALSE(options->median);
  CHECK_FALSE(options->raw);
  CHECK_FALSE(options->inplace);
  CHECK_FALSE(options->barrier);
  options = ParseBenchOptions({"--raw", "1", "--barrier", "1"});
  REQUIRE(options.ok());
  CHECK(options->raw);
  CHECK(options->barrier);
  options = ParseBenchOptions({"--inplace", "1", "-o", "all"});
  REQUIRE(options.ok());
  CHECK(options->inplace);
  CHECK(options->set_ranks == 0);
  options = ParseBenchOptions({"--set", "3"});
  REQUIRE(options.ok());
  CHECK(options->set_ranks == 3);
}

TEST_CASE("ParseBenchOptions takes --device", "[tools][bench]") {
  CHECK(ParseBenchOptions({}).value().device == "cpu");
  for (const std::string device : {"cpu", "cuda", "cuda-sim"}) {
    CHECK(ParseBenchOptions({"--device", device}).value().device == device);
  }
}

TEST_CASE("ParseBenchOptions names the bad flag", "[tools][bench]") {
  using Case = std::pair<std::vector<std::string>, std::string>;
  auto [args, message] = GENERATE(
      Case{{"-d", "float128"}, "--datatype: unknown value 'float128'"},
      Case{{"-o", "xor"}, "--op: unknown value 'xor'"},
      Case{{"-o", "alltoallv"},
           "--op: unknown value 'alltoallv' (one of: sum prod min max avg all allgather broadcast "
           "reducescatter alltoall)"},
      Case{{"-r", "-1"}, "--root must be an integer in [0, "},
      Case{{"-n", "0"}, "--iters must be an integer in [1, "},
      Case{{"-f", "1"}, "--stepfactor must be an integer in [2, "},
      Case{{"-c", "2"}, "--check must be an integer in [0, 1]"},
      Case{{"-b", "1M", "-e", "1K"}, "--minbytes (1048576) is larger than --maxbytes (1024)"},
      Case{{"-b", "lots"}, "--minbytes: 'lots' is not a byte size"},
      Case{{"-m", "vgg"}, "--model: unknown model 'vgg' (one of: resnet50)"},
      Case{{"--stat", "p99"}, "--stat: unknown value 'p99' (one of: mean median)"},
      Case{{"--raw", "1", "-o", "allgather"}, "--raw runs allreduce sums only (-o sum)"},
      Case{{"--raw", "1", "-o", "max"}, "--raw runs allreduce sums only (-o sum)"},
      Case{{"--inplace", "1", "-o", "allgather"}, "--inplace applies to allreduce only"},
      Case{{"--inplace", "2"}, "--inplace must be an integer in [0, 1]"},
      Case{{"--barrier", "yes"}, "--barrier must be an integer in [0, 1]"},
      Case{{"--device", "gpu"}, "--device: unknown value 'gpu' (one of: cpu cuda cuda-sim)"},
      Case{{"--device", "cuda", "--raw", "1"}, "--raw runs on host memory only (--device cpu)"},
      Case{{"--set", "1"}, "--set must be an integer in [2, "},
      Case{{"--set", "2", "--raw", "1"}, "--set runs the sweep's collectives in a process set"},
      Case{{"--set", "2", "--device", "cuda-sim"},
           "--set runs the sweep's collectives in a process set"},
      Case{{"-e"}, "-e needs a value"}, Case{{"--bogus"}, "unknown argument '--bogus'"});
  auto options = ParseBenchOptions(args);
  REQUIRE_FALSE(options.ok());
  CHECK_THAT(options.status().message(), Catch::StartsWith(message));
}

TEST_CASE("SweepSizes multiplies up to and including the maximum", "[tools][bench]") {
  BenchOptions options;
  options.min_bytes = 4096;
  options.max_bytes = 65536;
  CHECK(SweepSizes(options) == std::vector<int64_t>{4096, 8192, 16384, 32768, 65536});
  options.step_factor = 3;
  options.min_bytes = 1;
  options.max_bytes = 10;
  CHECK(SweepSizes(options) == std::vector<int64_t>{1, 3, 9});
  options.min_bytes = 0;
  options.max_bytes = 2;
  CHECK(SweepSizes(options) == std::vector<int64_t>{0, 1});
  options.min_bytes = options.max_bytes = int64_t{1} << 40;
  CHECK(SweepSizes(options) == std::vector<int64_t>{int64_t{1} << 40});
}

}  // namespace
}  // namespace kolo::bench
