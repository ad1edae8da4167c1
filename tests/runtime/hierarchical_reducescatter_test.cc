// The hierarchical reduce-scatter (ops/hierarchical_reducescatter.h) through the public API:
// runtimes in one process (real gRPC, real loopback mesh) posing as hosts by their host names,
// 2 hosts of 2 ranks in consecutive and interleaved placement and 3 hosts of 2 (interleaved),
// with shared memory or TCP within the host. Every rank's part is checked against the
// reduction computed directly, for integer and float dtypes, every reduce op, prescale and
// postscale, uneven and empty parts, fused groups whose tensors split differently, and a
// buffer of several MiB (past the ring's scratch and the segment's slots); which path ran is
// read from a rank's timeline, for KOLO_HIERARCHICAL on, auto (by size) and off.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "core/op_validation.h"
#include "kolo/options.h"
#include "tests/support/host_placement.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::HasActivity;
using kolo::testing::LocalJob;
using kolo::testing::OnHosts;
using kolo::testing::Watchdog;

namespace {

// One tensor of a reducescatter: its rows (cols columns) and this rank's input and output.
struct Part {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> input;
  std::vector<uint8_t> output;
  int64_t first_row = 0;  // of this rank's part
  int64_t part_rows = 0;
};

Part MakePart(Runtime& rt, DataType dtype, ReduceOp op, int64_t rows, int64_t cols) {
  Part p;
  p.rows = rows;
  p.cols = cols;
  p.input = kolo::testing::MakeInput(dtype, rows * cols, rt.rank(), op);
  for (int r = 0; r < rt.rank(); ++r)
    p.first_row += ReducescatterShape({rows, cols}, r, rt.size())[0];
  p.part_rows = ReducescatterShape({rows, cols}, rt.rank(), rt.size())[0];
  p.output.assign(static_cast<size_t>(p.part_rows * cols) * DataTypeSize(dtype), 0xCD);
  return p;
}

// "" when this rank's part is the reduction of every rank's input, scaled, else the first
// wrong element.
std::string CheckPart(Runtime& rt, const Part& p, DataType dtype, const AllreduceOptions& options,
                      const std::string& name) {
  const int64_t count = p.part_rows * p.cols;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t global = p.first_row * p.cols + i;
    double want = 0;
    if (options.prescale == 1.0 && options.postscale == 1.0) {
      want = kolo::testing::ExpectedAllreduce(rt.size(), global, options.op, dtype);
    } else {  // float sums of small integers: exact before the last scaling
      for (int r = 0; r < rt.size(); ++r) {
        want += options.prescale * kolo::testing::InputValue(r, global, options.op, dtype);
      }
      want *= options.postscale;
    }
    const double got = kolo::testing::ReadElement(p.output, dtype, i);
    const double tolerance = IsFloatingPoint(dtype) ? 1e-2 * std::max(1.0, std::abs(want)) : 0;
    if (!(std::abs(got - want) <= tolerance)) {
      return name + ": element " + std::to_string(i) + " of rank " + std::to_string(rt.rank()) +
             "'s part is " + std::to_string(got) + ", expected " + std::to_string(want);
    }
  }
  return "";
}

// Reducescatters one tensor of each of `rows` (a group, fused, when more than one); "" or the
// first wrong result.
std::string ReduceScatter(Runtime& rt, DataType dtype, const AllreduceOptions& options,
                          const std::vector<int64_t>& rows, int64_t cols) {
  std::vector<Part> parts;
  std::vector<std::string> names;
  std::vector<TensorView> inputs, outputs;
  for (size_t t = 0; t < rows.size(); ++t) {
    parts.push_back(MakePart(rt, dtype, options.op, rows[t], cols));
    names.push_back(DataTypeName(dtype) + "/" + ReduceOpName(options.op) + "/" +
                    std::to_string(options.prescale) + "/" + std::to_string(rows.size()) + "/" +
                    std::to_string(rows[t]));
  }
  for (Part& p : parts) {  // after the vector stopped growing
    inputs.push_back({p.input.data(), dtype, {p.rows, p.cols}, Device::Cpu()});
    outputs.push_back({p.output.data(), dtype, {p.part_rows, p.cols}, Device::Cpu()});
  }
  Status s = parts.size() == 1 ? rt.Reducescatter(names[0], inputs[0], outputs[0], options)
                               : rt.GroupedReducescatter(names, inputs, outputs, options);
  if (!s.ok()) return names[0] + ": " + s.ToString();
  for (size_t t = 0; t < parts.size(); ++t) {
    std::string failure = CheckPart(rt, parts[t], dtype, options, names[t]);
    if (!failure.empty()) return failure;
  }
  return "";
}

// Every dtype and op over parts of every size, fused groups, scaling and several MiB; "" or
// the first wrong result. A rank goes on after a wrong result, so that the others' ops do not
// wait for it.
std::string Sweep(Runtime& rt) {
  const int n = rt.size();
  std::string first_failure;
  auto check = [&first_failure](const std::string& failure) {
    if (first_failure.empty()) first_failure = failure;
  };
  for (DataType dtype : {DataType::kInt32, DataType::kFloat32, DataType::kBFloat16,
                         DataType::kFloat64, DataType::kUInt8}) {
    for (ReduceOp op : kolo::testing::kAllOps) {
      AllreduceOptions options;
      options.op = op;
      for (int64_t rows : {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{5 * n + 3}}) {
        check(ReduceScatter(rt, dtype, options, {rows}, 3));
      }
      // Fused: parts of different sizes, one empty on some ranks.
      check(ReduceScatter(rt, dtype, options, {2, 17, 7 * n + 1}, 3));
    }
  }
  AllreduceOptions scaled;
  scaled.prescale = 0.5;
  scaled.postscale = 4.0;
  check(ReduceScatter(rt, DataType::kFloat32, scaled, {5 * n + 3}, 3));
  check(ReduceScatter(rt, DataType::kFloat32, scaled, {3, 11}, 3));
  // Several MiB, alone and fused.
  check(ReduceScatter(rt, DataType::kFloat32, {}, {4099}, 257));
  check(ReduceScatter(rt, DataType::kInt32, {}, {1031, 2053}, 257));
  return first_failure;
}

}  // namespace

TEST_CASE("Hierarchical reducescatter leaves each rank its part, alone and fused",
          "[runtime][reducescatter][hierarchical]") {
  const std::string placement = GENERATE(as<std::string>(), "ab", "interleaved", "abc", "abba");
  const std::string transport = GENERATE(as<std::string>(), "auto", "tcp");
  Watchdog watchdog("hierarchical reducescatter, " + placement + ", " + transport,
                    std::chrono::seconds(120));
  const kolo::testing::TempDir temp("kolo-hierarchical-reducescatter-test-");
  {
    LocalJob job(
        placement == "abc" ? 6 : 4,
        OnHosts(placement, Hierarchical::kOn, *TransportFromName(transport), temp.File("t.json")));
    auto failures = job.RunOnAllRanks(Sweep);
    CHECK(failures == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  const std::string timeline = kolo::testing::FileText(temp.File("t.rank1.json"));
  CHECK(HasActivity(timeline, "HIERARCHICAL_REDUCESCATTER"));
  CHECK_FALSE(HasActivity(timeline, "RING_REDUCESCATTER"));
}

TEST_CASE("KOLO_HIERARCHICAL chooses the hierarchical reducescatter by mode and size",
          "[runtime][reducescatter][hierarchical]") {
  Watchdog watchdog("hierarchical reducescatter modes", std::chrono::seconds(120));
  // 4 KiB and 256 KiB of float32 in all: below and above auto's threshold.
  auto run = [](Hierarchical mode, int64_t rows) {
    const kolo::testing::TempDir temp("kolo-hierarchical-reducescatter-test-");
    {
      LocalJob job(4, OnHosts("ab", mode, Transport::kAuto, temp.File("t.json")));
      auto failures = job.RunOnAllRanks(
          [rows](Runtime& rt) { return ReduceScatter(rt, DataType::kFloat32, {}, {rows}, 256); });
      CHECK(failures == std::vector<std::string>{});
      for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
    }
    return kolo::testing::FileText(temp.File("t.rank3.json"));
  };
  SECTION("auto: by size") {
    const std::string small = run(Hierarchical::kAuto, 4);
    CHECK(HasActivity(small, "RING_REDUCESCATTER"));
    CHECK_FALSE(HasActivity(small, "HIERARCHICAL_REDUCESCATTER"));
    const std::string large = run(Hierarchical::kAuto, 256);
    CHECK(HasActivity(large, "HIERARCHICAL_REDUCESCATTER"));
    CHECK_FALSE(HasActivity(large, "RING_REDUCESCATTER"));
  }
  SECTION("off: flat at any size") {
    const std::string large = run(Hierarchical::kOff, 256);
    CHECK(HasActivity(large, "RING_REDUCESCATTER"));
    CHECK_FALSE(HasActivity(large, "HIERARCHICAL_REDUCESCATTER"));
  }
}
