// Grouped allreduce: correct results, one fused transfer whatever the fusion threshold (seen
// in the timeline), one callback, and the errors.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <future>

#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"
#include "tools/timeline/trace_model.h"
#include "tools/timeline/trace_set.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

TEST_CASE("A grouped allreduce travels as one transfer above the fusion threshold",
          "[runtime][grouped]") {
  Watchdog watchdog("grouped allreduce", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo-grouped-");
  const std::string& dir = temp.path();
  constexpr int kTensors = 5;
  {
    LocalJob job(3, [&](Options& o) {
      o.fusion_threshold_bytes = 1024;  // far below the group's size
      o.timeline_path = dir + "/g.json";
    });
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      for (int step = 0; step < 3; ++step) {  // later steps go by cache id
        std::vector<std::vector<uint8_t>> data;
        std::vector<std::string> names;
        std::vector<TensorView> views;
        for (int t = 0; t < kTensors; ++t) {
          const int64_t count = 100 + 997 * t;
          data.push_back(
              kolo::testing::MakeInput(DataType::kFloat32, count, rt.rank(), ReduceOp::kSum));
          names.push_back("layer" + std::to_string(t));
        }
        for (int t = 0; t < kTensors; ++t) {
          views.push_back({data[t].data(),
                           DataType::kFloat32,
                           {static_cast<int64_t>(data[t].size() / 4)},
                           Device::Cpu()});
        }
        std::promise<Status> done;
        int calls = 0;
        Status s = rt.GroupedAllreduceAsync(names, views, views, {}, [&](const Status& st) {
          if (++calls == 1) done.set_value(st);
        });
        if (!s.ok()) return s.ToString();
        s = done.get_future().get();
        if (!s.ok()) return s.ToString();
        for (int t = 0; t < kTensors; ++t) {
          std::string e = kolo::testing::CheckAllreduce(data[t], DataType::kFloat32,
                                                        views[t].shape[0], 3, ReduceOp::kSum);
          if (!e.empty()) return names[t] + ": " + e;
        }
      }
      return "";
    });
    CHECK(failures == std::vector<std::string>{});
  }
  auto set =
      timeline::LoadTraceSet({dir + "/g.rank0.json", dir + "/g.rank1.json", dir + "/g.rank2.json"});
  REQUIRE(set.ok());
  timeline::TraceModel model = timeline::BuildTraceModel(*set);
  REQUIRE(model.ops.size() == 3 * 3 * kTensors);
  for (const auto& op : model.ops) CHECK(op.group_size == kTensors);
}

TEST_CASE("Grouped allreduce errors: duplicate names at enqueue; ranks that group differently",
          "[runtime][grouped][errors]") {
  Watchdog watchdog("grouped allreduce errors", std::chrono::seconds(60));
  LocalJob job(2);
  float f[4] = {1, 1, 1, 1};
  TensorView fv{f, DataType::kFloat32, {4}, Device::Cpu()};
  Status twice = job.rank(0).GroupedAllreduce({"a", "a"}, {fv, fv}, {fv, fv});
  CHECK(twice.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(twice.message(), Catch::Contains("'a'"));

  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    float x[4] = {1, 1, 1, 1}, y[4] = {1, 1, 1, 1};
    TensorView xv{x, DataType::kFloat32, {4}, Device::Cpu()};
    TensorView yv{y, DataType::kFloat32, {4}, Device::Cpu()};
    Status s;
    if (rt.rank() == 0) {
      s = rt.GroupedAllreduce({"x", "y"}, {xv, yv}, {xv, yv});
    } else {
      std::promise<Status> px;
      Status ex = rt.AllreduceAsync("x", xv, xv, {}, [&](const Status& st) { px.set_value(st); });
      s = rt.Allreduce("y", yv, yv);
      Status sx = ex.ok() ? px.get_future().get() : ex;
      if (s.ok()) s = sx;
    }
    if (s.code() != StatusCode::kMismatch) return "expected a mismatch, got " + s.ToString();
    if (s.message().find("groups") == std::string::npos) return s.message();
    s = rt.GroupedAllreduce({"x", "y"}, {xv, yv}, {xv, yv});  // the job goes on
    return s.ok() ? "" : s.ToString();
  });
  CHECK(failures == std::vector<std::string>{});
}
