// Grouped allgather and grouped reducescatter over 1-4 ranks: exact results, one fused transfer
// whatever the fusion threshold (seen in the timeline), one callback, and the enqueue errors.
#include <catch2/catch.hpp>
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"
#include "tools/timeline/trace_model.h"
#include "tools/timeline/trace_set.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

constexpr int kMembers = 3;
constexpr int64_t kColumns = 3;

// Element (row, column) of member t's allgather input on `rank`: rank + 1 rows each.
int32_t GatherValue(int rank, int t, int64_t row, int64_t column) {
  return static_cast<int32_t>(rank * 1000 + t * 100 + row * 10 + column);
}

// Member t of the grouped reducescatter: 2 * t + 5 rows of kColumns, element i of rank r is
// r * 7 + i + t, so the sum over `size` ranks is 7 * size * (size - 1) / 2 + size * (i + t).
int64_t ScatterRows(int t) {
  return 2 * t + 5;
}

// Runs one grouped allgather and one grouped reducescatter on `rt` and checks them exactly.
std::string RunGroups(Runtime& rt) {
  const int rank = rt.rank();
  const int size = rt.size();
  std::vector<std::string> names;
  std::vector<std::vector<int32_t>> inputs(kMembers);
  std::vector<std::vector<int32_t>> outputs(kMembers);
  std::vector<TensorView> views;
  std::vector<Allocator> allocators;
  for (int t = 0; t < kMembers; ++t) {
    names.push_back("gather/" + std::to_string(t));
    const int64_t rows = rank + 1;
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t c = 0; c < kColumns; ++c) inputs[t].push_back(GatherValue(rank, t, row, c));
    }
    views.push_back({inputs[t].data(), DataType::kInt32, {rows, kColumns}, Device::Cpu()});
    allocators.push_back([&outputs, t](const std::vector<int64_t>& shape) -> void* {
      outputs[t].resize(static_cast<size_t>(shape[0] * shape[1]));
      return outputs[t].data();
    });
  }
  std::promise<Status> gathered;
  int calls = 0;
  Status s = rt.GroupedAllgatherAsync(names, views, allocators, [&](const Status& st) {
    if (++calls == 1) gathered.set_value(st);
  });
  if (!s.ok()) return s.ToString();
  s = gathered.get_future().get();
  if (!s.ok()) return "grouped allgather: " + s.ToString();
  for (int t = 0; t < kMembers; ++t) {
    size_t k = 0;
    for (int r = 0; r < size; ++r) {
      for (int64_t row = 0; row <= r; ++row) {
        for (int64_t c = 0; c < kColumns; ++c, ++k) {
          if (k >= outputs[t].size() || outputs[t][k] != GatherValue(r, t, row, c)) {
            return names[t] + ": wrong element " + std::to_string(k);
          }
        }
      }
    }
    if (k != outputs[t].size()) return names[t] + ": " + std::to_string(outputs[t].size());
  }

  names.clear();
  views.clear();
  std::vector<TensorView> parts;
  for (int t = 0; t < kMembers; ++t) {
    names.push_back("scatter/" + std::to_string(t));
    const int64_t rows = ScatterRows(t);
    inputs[t].assign(static_cast<size_t>(rows * kColumns), 0);
    for (size_t i = 0; i < inputs[t].size(); ++i) {
      inputs[t][i] = static_cast<int32_t>(rank * 7 + static_cast<int>(i) + t);
    }
    const std::vector<int64_t> part = ReducescatterShape({rows, kColumns}, rank, size);
    outputs[t].assign(static_cast<size_t>(part[0] * kColumns), -1);
    views.push_back({inputs[t].data(), DataType::kInt32, {rows, kColumns}, Device::Cpu()});
    parts.push_back({outputs[t].data(), DataType::kInt32, part, Device::Cpu()});
  }
  s = rt.GroupedReducescatter(names, views, parts);
  if (!s.ok()) return "grouped reducescatter: " + s.ToString();
  for (int t = 0; t < kMembers; ++t) {
    int64_t first_row = 0;
    for (int r = 0; r < rank; ++r) first_row += ReducescatterShape({ScatterRows(t)}, r, size)[0];
    for (size_t k = 0; k < outputs[t].size(); ++k) {
      const int64_t i = first_row * kColumns + static_cast<int64_t>(k);
      const int64_t expected = 7 * size * (size - 1) / 2 + size * (i + t);
      if (outputs[t][k] != expected) {
        return names[t] + ": element " + std::to_string(k) + " is " +
               std::to_string(outputs[t][k]) + ", expected " + std::to_string(expected);
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Grouped allgather and reducescatter: exact results in one transfer per group",
          "[runtime][grouped]") {
  const int size = GENERATE(1, 2, 3, 4);
  Watchdog watchdog("grouped allgather/reducescatter", std::chrono::seconds(90));
  const kolo::testing::TempDir temp("kolo-grouped-ops-");
  const std::string path = temp.path() + "/g.json";
  {
    LocalJob job(size, [&](Options& o) {
      o.fusion_threshold_bytes = 16;  // below every member: only the group fuses them
      o.timeline_path = path;
    });
    auto failures = job.RunOnAllRanks([](Runtime& rt) -> std::string {
      for (int step = 0; step < 2; ++step) {  // the reducescatter's second step goes by cache id
        std::string failure = RunGroups(rt);
        if (!failure.empty()) return "step " + std::to_string(step) + ": " + failure;
      }
      return "";
    });
    CHECK(failures == std::vector<std::string>{});
  }
  std::vector<std::string> files;
  for (int r = 0; r < size; ++r)
    files.push_back(temp.path() + "/g.rank" + std::to_string(r) + ".json");
  auto set = timeline::LoadTraceSet(files);
  REQUIRE(set.ok());
  timeline::TraceModel model = timeline::BuildTraceModel(*set);
  REQUIRE(model.ops.size() == static_cast<size_t>(size * 2 * 2 * kMembers));
  for (const auto& op : model.ops) CHECK(op.group_size == kMembers);
}

TEST_CASE(
    "Grouped allgather and reducescatter errors: at enqueue, and ranks that group differently",
    "[runtime][grouped][errors]") {
  Watchdog watchdog("grouped allgather/reducescatter errors", std::chrono::seconds(60));
  LocalJob job(2);
  Runtime& rt = job.rank(0);
  float f[4] = {1, 1, 1, 1};
  TensorView fv{f, DataType::kFloat32, {4}, Device::Cpu()};
  TensorView scalar{f, DataType::kFloat32, {}, Device::Cpu()};
  Allocator none = [](const std::vector<int64_t>&) -> void* { return nullptr; };

  Status s = rt.GroupedAllgather({"a", "b"}, {fv, fv}, {none});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("grouped allgather") && Catch::Contains("allocators"));
  s = rt.GroupedAllgather({"a", "b"}, {fv, scalar}, {none, none});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("'b'") && Catch::Contains("scalar"));
  s = rt.GroupedAllgather({"a", "a"}, {fv, fv}, {none, none});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("grouped allgather names 'a'"));
  s = rt.GroupedReducescatter({}, {}, {});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("at least one"));
  TensorView wrong_part{f, DataType::kFloat32, {4}, Device::Cpu()};  // rank 0 gets 2 of 4
  s = rt.GroupedReducescatter({"r"}, {fv}, {wrong_part});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("grouped reducescatter") && Catch::Contains("'r'"));

  auto failures = job.RunOnAllRanks([&](Runtime& r) -> std::string {
    float x[4] = {1, 2, 3, 4}, y[4] = {1, 2, 3, 4}, px[2], py[2];
    TensorView xv{x, DataType::kFloat32, {4}, Device::Cpu()};
    TensorView yv{y, DataType::kFloat32, {4}, Device::Cpu()};
    TensorView pxv{px, DataType::kFloat32, {2}, Device::Cpu()};
    TensorView pyv{py, DataType::kFloat32, {2}, Device::Cpu()};
    Status st;
    if (r.rank() == 0) {
      st = r.GroupedReducescatter({"x", "y"}, {xv, yv}, {pxv, pyv});
    } else {  // the same tensors, grouped as {"y", "x"}: another group
      st = r.GroupedReducescatter({"y", "x"}, {yv, xv}, {pyv, pxv});
    }
    if (st.code() != StatusCode::kMismatch) return "expected a mismatch, got " + st.ToString();
    if (st.message().find("groups") == std::string::npos) return st.message();
    st = r.GroupedReducescatter({"x", "y"}, {xv, yv}, {pxv, pyv});  // the job goes on
    if (!st.ok()) return st.ToString();
    const float base = r.rank() == 0 ? 1 : 3;
    if (px[0] != 2 * base || px[1] != 2 * (base + 1) || py[0] != 2 * base) return "wrong sums";
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}
