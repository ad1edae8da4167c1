// Reducescatter through the public API, over real gRPC and loopback sockets: uneven splits of
// dimension 0, every dtype, sum and average, through shared memory and over the TCP ring (the
// path read from the timeline), and argument errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "core/config/config_table.h"
#include "core/op_validation.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

using kolo::testing::kAllDataTypes;

std::string CheckReducescatter(Runtime& rt, DataType dtype, ReduceOp op, int64_t rows,
                               int64_t cols) {
  const int64_t count = rows * cols;
  std::vector<uint8_t> input = kolo::testing::MakeInput(dtype, count, rt.rank(), op);
  const std::vector<uint8_t> input_copy = input;
  const std::vector<int64_t> part = ReducescatterShape({rows, cols}, rt.rank(), rt.size());
  int64_t first_row = 0;
  for (int r = 0; r < rt.rank(); ++r)
    first_row += ReducescatterShape({rows, cols}, r, rt.size())[0];
  const int64_t part_count = part[0] * cols;
  std::vector<uint8_t> output(static_cast<size_t>(part_count) * DataTypeSize(dtype) + 1, 0xCD);
  AllreduceOptions options;
  options.op = op;
  const std::string name =
      DataTypeName(dtype) + "/" + ReduceOpName(op) + "/" + std::to_string(rows);
  Status s = rt.Reducescatter(name, {input.data(), dtype, {rows, cols}, Device::Cpu()},
                              {output.data(), dtype, part, Device::Cpu()}, options);
  if (!s.ok()) return name + ": " + s.ToString();
  if (input != input_copy) return name + ": the input was modified";
  // The full allreduce result, restricted to this rank's rows.
  for (int64_t i = 0; i < part_count; ++i) {
    const int64_t global = first_row * cols + i;
    const double want = kolo::testing::ExpectedAllreduce(rt.size(), global, op, dtype);
    const double got = kolo::testing::ReadElement(output, dtype, i);
    const double tolerance = IsFloatingPoint(dtype) ? 1e-2 * std::max(1.0, std::abs(want)) : 0;
    if (std::abs(got - want) > tolerance) {
      return name + ": element " + std::to_string(i) + " of rank " + std::to_string(rt.rank()) +
             " is " + std::to_string(got) + ", expected " + std::to_string(want);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("The rows split as documented", "[runtime][reducescatter]") {
  CHECK(SplitRows(10, 4) == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(SplitRows(2, 4) == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(SplitRows(0, 3) == std::vector<int64_t>{0, 0, 0});
  CHECK(ReducescatterShape({10, 7}, 2, 4) == std::vector<int64_t>{2, 7});
  CHECK(ReducescatterShape({}, 0, 1) == std::vector<int64_t>{1});
}

TEST_CASE("Reducescatter leaves each rank its part of the reduction", "[runtime][reducescatter]") {
  const int n = GENERATE(1, 2, 3, 4);
  // On one host: through shared memory (auto), or the TCP ring (tcp).
  const std::string transport = GENERATE(as<std::string>(), "auto", "tcp");
  Watchdog watchdog("reducescatter sweep with " + std::to_string(n) + " ranks over " + transport,
                    std::chrono::seconds(90));
  const kolo::testing::TempDir temp("kolo-reducescatter-test-");
  {
    LocalJob job(n, [&](Options& options) {
      options.transport = *TransportFromName(transport);
      options.timeline_path = temp.File("t.json");
    });
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      for (DataType dtype : kAllDataTypes) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
          if (!kolo::testing::HasReduceOp(dtype, op)) continue;
          for (int64_t rows : {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{5 * n + 3}}) {
            std::string e = CheckReducescatter(rt, dtype, op, rows, 3);
            if (!e.empty()) return e;
          }
        }
      }
      // Several MiB, more than the ring's scratch and the segment's 1 MiB slots.
      return CheckReducescatter(rt, DataType::kFloat32, ReduceOp::kSum, 4099, 257);
    });
    CHECK(failures == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  if (n > 1) {
    const std::string timeline = kolo::testing::FileText(temp.File("t.rank0.json"));
    CHECK(kolo::testing::HasActivity(timeline, "SHM_REDUCESCATTER") == (transport == "auto"));
    CHECK(kolo::testing::HasActivity(timeline, "RING_REDUCESCATTER") == (transport == "tcp"));
  }
}

TEST_CASE("Reducescatter into the input's own block, over shared memory and TCP",
          "[runtime][reducescatter]") {
  const std::string transport = GENERATE(as<std::string>(), "auto", "tcp");
  Watchdog watchdog("in-place reducescatter over " + transport, std::chrono::seconds(60));
  const int n = 3;
  LocalJob job(n, [&](Options& options) { options.transport = *TransportFromName(transport); });
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    // 3 x 100,003 rows of one int32: blocks past a slot's piece; the part is a view of the input.
    const int64_t rows = 3 * 100003;
    std::vector<uint8_t> data =
        kolo::testing::MakeInput(DataType::kInt32, rows, rt.rank(), ReduceOp::kSum);
    const int64_t part = rows / n;
    uint8_t* own = data.data() + static_cast<size_t>(rt.rank() * part) * 4;
    Status s = rt.Reducescatter("in place", {data.data(), DataType::kInt32, {rows}, Device::Cpu()},
                                {own, DataType::kInt32, {part}, Device::Cpu()});
    if (!s.ok()) return s.ToString();
    for (int64_t i = 0; i < part; ++i) {
      const int64_t global = rt.rank() * part + i;
      const double want =
          kolo::testing::ExpectedAllreduce(n, global, ReduceOp::kSum, DataType::kInt32);
      const double got = kolo::testing::ReadElement(data, DataType::kInt32, global);
      if (got != want) {
        return transport + ": element " + std::to_string(global) + " is " + std::to_string(got) +
               ", expected " + std::to_string(want);
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Reducescatter errors: a scalar and a wrong output size at enqueue, shapes everywhere",
          "[runtime][reducescatter][errors]") {
  Watchdog watchdog("reducescatter errors", std::chrono::seconds(60));
  LocalJob job(2);
  float in[8] = {0}, out[8] = {0};
  // As allgather and alltoall (and Horovod): a scalar has no dimension 0 to split.
  bool called = false;
  Status scalar = job.rank(0).ReducescatterAsync(
      "scalar", {in, DataType::kFloat32, {}, Device::Cpu()},
      {out, DataType::kFloat32, {}, Device::Cpu()}, {}, [&](const Status&) { called = true; });
  CHECK(scalar.code() == StatusCode::kInvalidArgument);
  CHECK(scalar.message() ==
        "reducescatter 'scalar': a scalar cannot be split along dimension 0; pass a tensor of "
        "shape [1]");
  CHECK_FALSE(called);
  Status wrong = job.rank(0).ReducescatterAsync(
      "rs", {in, DataType::kFloat32, {4, 2}, Device::Cpu()},
      {out, DataType::kFloat32, {4, 2}, Device::Cpu()}, {}, [](const Status&) {});
  CHECK(wrong.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(wrong.message(), Catch::StartsWith("reducescatter 'rs': rank 0 receives [2, 2]"));

  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    float x[8] = {0}, y[8] = {0};
    const int64_t rows = rt.rank() == 0 ? 4 : 2;
    Status s = rt.Reducescatter(
        "shapes", {x, DataType::kFloat32, {rows, 2}, Device::Cpu()},
        {y, DataType::kFloat32, ReducescatterShape({rows, 2}, rt.rank(), 2), Device::Cpu()});
    if (s.code() != StatusCode::kMismatch) return "expected a mismatch, got " + s.ToString();
    if (s.message().find("reducescatter shapes") == std::string::npos) return s.message();
    s = rt.Reducescatter("after", {x, DataType::kFloat32, {4, 2}, Device::Cpu()},
                         {y, DataType::kFloat32, {2, 2}, Device::Cpu()});
    return s.ok() ? "" : "job did not go on: " + s.ToString();
  });
  CHECK(failures == std::vector<std::string>{});
}
