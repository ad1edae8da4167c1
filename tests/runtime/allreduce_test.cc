// Multi-rank allreduce through the public API: N runtimes in one process, joined over real
// gRPC and real loopback sockets.
#include <atomic>
#include <catch2/catch.hpp>
#include <future>

#include "core/config/config_table.h"
#include "tests/support/local_job.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

using kolo::testing::kAllDataTypes;
using kolo::testing::kAllOps;
using kolo::testing::View;

// One allreduce on this rank, checked against the direct computation.
std::string CheckOne(Runtime& rt, const std::string& name, DataType dtype, ReduceOp op,
                     int64_t count, bool in_place) {
  std::vector<uint8_t> input = kolo::testing::MakeInput(dtype, count, rt.rank(), op);
  std::vector<uint8_t> output(input.size(), 0xAB);
  AllreduceOptions options;
  options.op = op;
  Status s =
      rt.Allreduce(name, View(input, dtype, count),
                   in_place ? View(input, dtype, count) : View(output, dtype, count), options);
  if (!s.ok()) return name + ": " + s.ToString();
  return kolo::testing::CheckAllreduce(in_place ? input : output, dtype, count, rt.size(), op);
}

}  // namespace

TEST_CASE("Allreduce matches a direct computation for every dtype, op and size",
          "[runtime][allreduce]") {
  const int n = GENERATE(1, 2, 3, 4);
  // One host: auto picks shared memory; tcp is what multi-host jobs run.
  const std::string transport = GENERATE("tcp", "auto");
  Watchdog watchdog("allreduce sweep with " + std::to_string(n) + " ranks over " + transport,
                    std::chrono::seconds(90));
  LocalJob job(n, [&](Options& o) { o.transport = *TransportFromName(transport); });
  const std::vector<int64_t> counts = {0, 1, 13, 1000 * n + 1};
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    for (DataType dtype : kAllDataTypes) {
      for (ReduceOp op : kAllOps) {
        if (!kolo::testing::HasReduceOp(dtype, op)) continue;  // bool average: scaling_test.cc
        for (int64_t count : counts) {
          std::string name =
              DataTypeName(dtype) + "/" + ReduceOpName(op) + "/" + std::to_string(count);
          std::string error = CheckOne(rt, name, dtype, op, count, count % 2 == 1);
          if (!error.empty()) return error;
        }
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Allreduce of several MiB is exact, in place and out of place", "[runtime][allreduce]") {
  const int n = GENERATE(2, 3, 4);
  const std::string transport = GENERATE("tcp", "auto");
  Watchdog watchdog("large allreduce over " + transport, std::chrono::seconds(90));
  LocalJob job(n, [&](Options& o) { o.transport = *TransportFromName(transport); });
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    for (int round = 0; round < 2; ++round) {  // second round uses cache ids
      std::string e = CheckOne(rt, "big/f32", DataType::kFloat32, ReduceOp::kSum, (3 << 20) / 4 + 3,
                               round == 1);
      if (e.empty()) {
        e = CheckOne(rt, "big/f64", DataType::kFloat64, ReduceOp::kMax, (5 << 20) / 8 + 1,
                     round == 0);
      }
      if (!e.empty()) return e;
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Up to eight ranks as threads agree", "[runtime][allreduce]") {
  const int n = GENERATE(5, 8);
  Watchdog watchdog("eight-rank allreduce", std::chrono::seconds(90));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::string e = CheckOne(rt, "w", DataType::kFloat32, ReduceOp::kAverage, 4099, false);
    if (e.empty()) e = CheckOne(rt, "i", DataType::kInt64, ReduceOp::kSum, 7, true);
    return e;
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Many tensors in flight at once are fused and each gets its own result",
          "[runtime][fusion]") {
  const int64_t threshold = GENERATE(int64_t{64} << 20, int64_t{4096}, int64_t{0});
  const std::string transport = GENERATE("tcp", "auto");
  Watchdog watchdog("many tensors in flight over " + transport, std::chrono::seconds(90));
  LocalJob job(3, [&](Options& o) {
    o.transport = *TransportFromName(transport);
    o.fusion_threshold_bytes = threshold;
    o.cycle_time_ms = 5;
  });
  constexpr int kTensors = 40;
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<std::vector<uint8_t>> inputs(kTensors), outputs(kTensors);
    std::vector<std::promise<Status>> done(kTensors);
    for (int t = 0; t < kTensors; ++t) {
      const int64_t count = 1 + t * 37;
      const DataType dtype = t % 3 == 0 ? DataType::kFloat64 : DataType::kFloat32;
      inputs[t] = kolo::testing::MakeInput(dtype, count, rt.rank(), ReduceOp::kSum);
      outputs[t].assign(inputs[t].size(), 0);
      Status s = rt.AllreduceAsync("grad/" + std::to_string(t), View(inputs[t], dtype, count),
                                   View(outputs[t], dtype, count), {},
                                   [&done, t](const Status& st) { done[t].set_value(st); });
      if (!s.ok()) return s.ToString();
    }
    for (int t = 0; t < kTensors; ++t) {
      Status s = done[t].get_future().get();
      if (!s.ok()) return "grad/" + std::to_string(t) + ": " + s.ToString();
      const DataType dtype = t % 3 == 0 ? DataType::kFloat64 : DataType::kFloat32;
      std::string e =
          kolo::testing::CheckAllreduce(outputs[t], dtype, 1 + t * 37, rt.size(), ReduceOp::kSum);
      if (!e.empty()) return "grad/" + std::to_string(t) + ": " + e;
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Prescale and postscale multiply before and after the sum", "[runtime][allreduce]") {
  Watchdog watchdog("scaled allreduce", std::chrono::seconds(60));
  LocalJob job(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<double> x(5, rt.rank() + 1.0);  // 1 and 2
    TensorView view{x.data(), DataType::kFloat64, {5}, Device::Cpu()};
    AllreduceOptions options;
    options.op = ReduceOp::kAverage;
    options.prescale = 4.0;
    options.postscale = 0.5;
    Status s = rt.Allreduce("scaled", view, view, options);
    if (!s.ok()) return s.ToString();
    // (4*1 + 4*2) / 2 * 0.5 = 3
    for (double v : x) {
      if (v != 3.0) return "got " + std::to_string(v) + ", expected 3";
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}
