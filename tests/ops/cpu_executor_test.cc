// Tests of ops/cpu_executor.h through real loopback TCP (transport::TcpMesh) with 1..4
// thread-ranks: single and fused allreduces, in and out of place, prescale/postscale (integers
// truncated), average for floating and integer dtypes, bool, fusion-buffer reuse across responses
// of changing size, and the error texts; the same allreduces over shared memory
// (transport::ShmMesh).
#include "ops/cpu_executor.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tests/ops/ring_reference.h"
#include "tests/support/cross_memory_attach.h"
#include "tests/support/loopback_mesh.h"
#include "tests/support/watchdog.h"
#include "transport/shm/shm_mesh.h"

namespace kolo::ops {
namespace {

using namespace std::chrono_literals;
using testing::ElementBuffer;

struct Scenario {
  DataType dtype;
  ReduceOp op;
  double prescale;
  double postscale;
  std::vector<size_t> counts;  // one tensor each; several: a fused response
  bool in_place;
};

std::string Describe(const Scenario& s) {
  return DataTypeName(s.dtype) + " " + ReduceOpName(s.op) + " pre " + std::to_string(s.prescale) +
         " post " + std::to_string(s.postscale) + " " + std::to_string(s.counts.size()) +
         " tensors" + (s.in_place ? " in place" : "");
}

// Element i of tensor t as `rank` submits it (small integers: exact in every dtype).
double Input(const Scenario& s, int rank, size_t t, size_t i) {
  const bool own_values = s.op == ReduceOp::kProduct || s.dtype == DataType::kBool;
  return testing::RankInput(s.dtype, own_values ? s.op : ReduceOp::kSum, rank, i + 100 * t);
}

// x * factor as Horovod's ScaleBuffer computes it: integers in double; float64 in double;
// float32, float16 and bfloat16 in float, the factor rounded to float first.
double ScaleAsHorovod(DataType dtype, double x, double factor) {
  if (!IsFloatingPoint(dtype) || dtype == DataType::kFloat64) return x * factor;
  return static_cast<double>(static_cast<float>(factor) * static_cast<float>(x));
}

// The result the executor must produce, rounded to the dtype as it is stored. Scaled as Horovod
// does (ScaleAsHorovod), integers truncated toward zero (each rank's prescaled input, then the
// result); an average folds 1/ranks into the postscale, but an integer average without one is
// exact division. The scenarios stay in range.
double Expected(const Scenario& s, int n, size_t t, size_t i) {
  const bool integer = !IsFloatingPoint(s.dtype);
  auto contribution = [&](int rank) {
    const double v = ScaleAsHorovod(s.dtype, Input(s, rank, t, i), s.prescale);
    return integer ? std::trunc(v) : v;
  };
  double reduced = contribution(0);
  for (int rank = 1; rank < n; ++rank) {
    reduced = testing::ReferenceReduce(s.op, reduced, contribution(rank), s.dtype);
  }
  double result = ScaleAsHorovod(s.dtype, reduced, s.postscale);
  if (s.op == ReduceOp::kAverage) {
    result = integer && s.postscale == 1.0 ? reduced / n
                                           : ScaleAsHorovod(s.dtype, reduced, s.postscale / n);
  }
  if (integer) result = std::trunc(result);
  ElementBuffer stored(s.dtype, 1);
  stored.Set(0, result);
  return stored.Get(0);
}

// Runs `s` on one rank's executor; "" when every output matches.
std::string RunScenario(CpuExecutor& executor, int rank, int n, const Scenario& s) {
  std::vector<ElementBuffer> inputs;
  std::vector<ElementBuffer> outputs;
  std::vector<TensorEntry> entries(s.counts.size());
  Response response;
  response.dtype = s.dtype;
  response.reduce_op = s.op;
  response.prescale = s.prescale;
  response.postscale = s.postscale;
  for (size_t t = 0; t < s.counts.size(); ++t) {
    inputs.emplace_back(s.dtype, s.counts[t]);
    outputs.emplace_back(s.dtype, s.counts[t]);
    for (size_t i = 0; i < s.counts[t]; ++i) inputs[t].Set(i, Input(s, rank, t, i));
  }
  std::vector<TensorEntry*> pointers;
  for (size_t t = 0; t < s.counts.size(); ++t) {
    TensorEntry& entry = entries[t];
    entry.meta.name = "t" + std::to_string(t);
    entry.meta.dtype = s.dtype;
    entry.meta.shape = {static_cast<int64_t>(s.counts[t])};
    entry.input = {inputs[t].data(), s.dtype, entry.meta.shape, Device::Cpu()};
    entry.output = entry.input;
    if (!s.in_place) entry.output.data = outputs[t].data();
    response.names.push_back(entry.meta.name);
    response.num_elements.push_back(static_cast<int64_t>(s.counts[t]));
    pointers.push_back(&entry);
  }
  const Status status = executor.Execute(response, pointers, nullptr);
  if (!status.ok()) return Describe(s) + ": " + status.ToString();
  for (size_t t = 0; t < s.counts.size(); ++t) {
    const ElementBuffer& result = s.in_place ? inputs[t] : outputs[t];
    for (size_t i = 0; i < s.counts[t]; ++i) {
      const double expected = Expected(s, n, t, i);
      if (result.Get(i) != expected) {
        return Describe(s) + ": tensor " + std::to_string(t) + " element " + std::to_string(i) +
               " is " + std::to_string(result.Get(i)) + ", expected " + std::to_string(expected);
      }
    }
  }
  return "";
}

// Runs every scenario on this rank's executor; on the first failure calls `interrupt` (so that
// the other ranks stop at once) and returns "rank r: <failure>"; "" when all passed.
std::string RunScenarios(CpuExecutor& executor, int rank, int n,
                         const std::vector<Scenario>& scenarios,
                         const std::function<void()>& interrupt) {
  for (const Scenario& s : scenarios) {
    std::string failure = RunScenario(executor, rank, n, s);
    if (!failure.empty()) {
      interrupt();
      return "rank " + std::to_string(rank) + ": " + failure;
    }
  }
  return std::string();
}

std::vector<Scenario> Scenarios() {
  std::vector<Scenario> scenarios;
  const std::vector<std::vector<size_t>> layouts = {
      {1}, {13}, {1031}, {3, 0, 1, 17}, {1000, 1, 2048, 7, 5}, {40000, 3}};
  for (const auto& counts : layouts) {
    for (bool in_place : {false, true}) {
      for (DataType dtype :
           {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
        scenarios.push_back({dtype, ReduceOp::kSum, 2.0, 0.25, counts, in_place});
        scenarios.push_back({dtype, ReduceOp::kAverage, 1.0, 1.0, counts, in_place});
        scenarios.push_back({dtype, ReduceOp::kAverage, 0.5, 4.0, counts, in_place});
        scenarios.push_back({dtype, ReduceOp::kMax, 2.0, 1.0, counts, in_place});
        scenarios.push_back({dtype, ReduceOp::kProduct, 2.0, 0.5, counts, in_place});
      }
      for (DataType dtype : {DataType::kInt32, DataType::kInt8, DataType::kUInt8, DataType::kInt64,
                             DataType::kUInt16, DataType::kInt16}) {
        scenarios.push_back({dtype, ReduceOp::kSum, 1.0, 1.0, counts, in_place});
        scenarios.push_back({dtype, ReduceOp::kAverage, 1.0, 1.0, counts, in_place});
        scenarios.push_back({dtype, ReduceOp::kMin, 1.0, 1.0, counts, in_place});
        // Integer scaling: truncated per rank (prescale) and on the result (postscale).
        scenarios.push_back({dtype, ReduceOp::kSum, 3.0, 0.5, counts, in_place});
        scenarios.push_back({dtype, ReduceOp::kAverage, 0.5, 3.0, counts, in_place});
        scenarios.push_back({dtype, ReduceOp::kMax, 1.5, 1.0, counts, in_place});
      }
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
        scenarios.push_back({DataType::kBool, op, 1.0, 1.0, counts, in_place});
      }
    }
  }
  return scenarios;
}

TEST_CASE("the CPU executor allreduces single and fused tensors with scaling and average",
          "[ops][executor][tcp]") {
  const int n = GENERATE(range(1, 5));
  testing::Watchdog watchdog("CPU executor, n=" + std::to_string(n), 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  const std::vector<Scenario> scenarios = Scenarios();
  const std::vector<std::string> failures = testing::RunOnRanks(n, [&](int rank) {
    // One executor per rank for every scenario: the fusion buffer grows and is reused.
    CpuExecutor executor(*(*meshes)[rank], MakeLogger(rank, "ops", spdlog::level::warn),
                         /*scratch_bytes=*/4099);
    return RunScenarios(executor, rank, n, scenarios, [&] {
      testing::InterruptAll(*meshes, "rank " + std::to_string(rank) + " failed");
    });
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("fused tensors whose memory overlaps still reduce their own inputs",
          "[ops][executor][tcp]") {
  // Tensor a writes its result where tensor b reads its input: reducing in place would feed b
  // a's result, so the executor takes the fusion buffer here.
  testing::Watchdog watchdog("CPU executor, overlapping tensors", 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(2);
  REQUIRE(meshes.status().ToString() == "OK");
  const std::vector<std::string> failures = testing::RunOnRanks(2, [&](int rank) {
    CpuExecutor executor(*(*meshes)[rank], MakeLogger(rank, "ops", spdlog::level::warn), 64);
    std::vector<float> a_in(100, 1.0f + rank), shared(100, 10.0f * (rank + 1)), b_out(100, 0);
    TensorEntry a, b;
    a.meta.name = "a";
    b.meta.name = "b";
    a.input = {a_in.data(), DataType::kFloat32, {100}, Device::Cpu()};
    a.output = {shared.data(), DataType::kFloat32, {100}, Device::Cpu()};
    b.input = {shared.data(), DataType::kFloat32, {100}, Device::Cpu()};
    b.output = {b_out.data(), DataType::kFloat32, {100}, Device::Cpu()};
    Response response;
    response.dtype = DataType::kFloat32;
    response.names = {"a", "b"};
    response.num_elements = {100, 100};
    Status status = executor.Execute(response, {&a, &b}, nullptr);
    if (!status.ok()) return status.ToString();
    for (int i = 0; i < 100; ++i) {
      if (shared[i] != 3.0f) return "a[" + std::to_string(i) + "] = " + std::to_string(shared[i]);
      if (b_out[i] != 30.0f) return "b[" + std::to_string(i) + "] = " + std::to_string(b_out[i]);
    }
    return std::string();
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("the CPU executor allreduces over shared memory, through many small slots or pieces",
          "[ops][executor][shm]") {
  const int n = GENERATE(range(1, 5));
  // Single copy with 64-byte pieces from the first byte, or the slots alone.
  const bool single_copy = GENERATE(true, false);
  testing::Watchdog watchdog("CPU executor over shared memory, n=" + std::to_string(n) +
                                 ", single copy " + (single_copy ? "on" : "off"),
                             60s);
  if (single_copy && !testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  // 256-byte slots: most tensors take several chunks, and fused tensors straddle chunks.
  std::vector<std::unique_ptr<transport::ShmMesh>> planes(n);
  const std::vector<std::string> created = testing::RunOnRanks(n, [&](int rank) {
    transport::ShmMesh::Config config;
    config.rank = rank;
    config.size = n;
    config.slot_bytes = 256;
    config.timeout_seconds = 10;
    config.single_copy =
        single_copy ? transport::ShmMesh::SingleCopy::kOn : transport::ShmMesh::SingleCopy::kOff;
    StatusOr<std::unique_ptr<transport::ShmMesh>> plane =
        transport::ShmMesh::Create(config, *(*meshes)[rank]);
    if (!plane.ok()) return plane.status().ToString();
    planes[rank] = std::move(plane).value();
    return std::string();
  });
  for (const std::string& failure : created) REQUIRE(failure == "");
  // Without the 40000-element layout: through 256-byte slots it is thousands of hand-offs
  // between ranks per op, each a trip through the scheduler when the ranks outnumber the
  // cores, and it outran the watchdog on a loaded 2-core machine. Chunks are straddled
  // plenty by the layouts of up to 2048 elements.
  std::vector<Scenario> scenarios;
  for (const Scenario& s : Scenarios()) {
    if (*std::max_element(s.counts.begin(), s.counts.end()) <= 4096) scenarios.push_back(s);
  }
  const std::vector<std::string> failures = testing::RunOnRanks(n, [&](int rank) {
    CpuExecutor executor(*(*meshes)[rank], MakeLogger(rank, "ops", spdlog::level::warn),
                         /*scratch_bytes=*/4099, planes[rank].get(), ShmSingleCopy::Tuning{64, 1});
    return RunScenarios(executor, rank, n, scenarios, [&] {
      for (auto& plane : planes) plane->Interrupt(Aborted("rank " + std::to_string(rank)));
    });
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("the CPU executor refuses ops it does not implement and bool scaling and average",
          "[ops][executor]") {
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(1);
  REQUIRE(meshes.status().ToString() == "OK");
  CpuExecutor executor(*(*meshes)[0], nullptr);
  std::vector<int32_t> data = {1, 2, 3};
  TensorEntry entry;
  entry.meta.name = "ints";
  entry.input = {data.data(), DataType::kInt32, {3}, Device::Cpu()};
  entry.output = entry.input;
  Response response;
  response.dtype = DataType::kInt32;
  response.names = {"ints"};
  response.num_elements = {3};

  response.op = static_cast<OpType>(42);
  CHECK(executor.Execute(response, {&entry}, nullptr) == Internal("op(42) is not implemented"));
  response.op = OpType::kAlltoall;  // without the split matrix
  CHECK(executor.Execute(response, {&entry}, nullptr).code() == StatusCode::kInternal);
  response.op = OpType::kAllgather;  // without the ranks' first dimensions
  CHECK(executor.Execute(response, {&entry}, nullptr).code() == StatusCode::kInternal);

  response.op = OpType::kAllreduce;
  std::vector<uint8_t> flags = {1, 0};
  TensorEntry flag_entry;
  flag_entry.meta.name = "flags";
  flag_entry.input = {flags.data(), DataType::kBool, {2}, Device::Cpu()};
  flag_entry.output = flag_entry.input;
  Response bools = response;
  bools.dtype = DataType::kBool;
  bools.names = {"flags"};
  bools.num_elements = {2};
  bools.prescale = 2.0;
  const Status scaled = executor.Execute(bools, {&flag_entry}, nullptr);
  CHECK(scaled.code() == StatusCode::kInvalidArgument);
  CHECK(scaled.message().rfind("allreduce 'flags': ", 0) == 0);
  bools.prescale = 1.0;
  bools.reduce_op = ReduceOp::kAverage;
  CHECK(executor.Execute(bools, {&flag_entry}, nullptr).code() == StatusCode::kInvalidArgument);
  CHECK(flags == std::vector<uint8_t>{1, 0});

  response.names = {"ints", "missing"};
  CHECK(executor.Execute(response, {&entry}, nullptr).code() == StatusCode::kInternal);

  response.names = {"ints"};
  REQUIRE(executor.Execute(response, {&entry}, nullptr).ok());
  CHECK(data == std::vector<int32_t>{1, 2, 3});
  response.prescale = 2.5;  // integers scale (truncated), one rank: just the scaling
  REQUIRE(executor.Execute(response, {&entry}, nullptr).ok());
  CHECK(data == std::vector<int32_t>{2, 5, 7});
}

TEST_CASE("op descriptions name the tensors and the fused size", "[ops][executor]") {
  std::vector<TensorEntry> entries(5);
  std::vector<TensorEntry*> pointers;
  const char* names[] = {"a", "b", "c", "d", "e"};
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].meta.name = names[i];
    entries[i].output = {nullptr, DataType::kFloat32, {3, 256, 1024}, Device::Cpu()};
    pointers.push_back(&entries[i]);
  }
  CHECK(DescribeOp(OpType::kAllreduce, {pointers[0]}) == "allreduce 'a'");
  CHECK(DescribeOp(OpType::kAllreduce, {pointers[0], pointers[1]}) ==
        "allreduce 'a', 'b' (2 tensors, 6.0 MiB)");
  CHECK(DescribeOp(OpType::kAllreduce, pointers) ==
        "allreduce 'a', 'b' and 3 more (5 tensors, 15.0 MiB)");
  // Into a kept string (the executor's, reused op after op): replaced, never appended to.
  std::string kept = "broadcast 'an earlier and much longer name than these'";
  DescribeOp(OpType::kAllreduce, pointers, &kept);
  CHECK(kept == "allreduce 'a', 'b' and 3 more (5 tensors, 15.0 MiB)");
  DescribeOp(OpType::kAllgather, {pointers[4]}, &kept);
  CHECK(kept == "allgather 'e'");
  DescribeOp(OpType::kAllreduce, {}, &kept);
  CHECK(kept == "allreduce");
  CHECK(FormatBytes(0) == "0 B");
  CHECK(FormatBytes(1023) == "1023 B");
  CHECK(FormatBytes(1536) == "1.5 KiB");
  CHECK(FormatBytes(size_t{12} << 20) == "12.0 MiB");
  CHECK(FormatBytes(size_t{3} << 30) == "3.0 GiB");
}

}  // namespace
}  // namespace kolo::ops
