// Mixed-dtype groups (Horovod splits them per dtype when fusing): a grouped allreduce,
// allgather and reducescatter whose members have different dtypes is one callback and one
// fused transfer per dtype, whatever the fusion threshold, over 1-4 ranks with exact results.
#include <catch2/catch.hpp>
#include <cstdint>
#include <future>
#include <map>
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

template <typename T>
TensorView ViewOf(std::vector<T>& v, DataType dtype, std::vector<int64_t> shape) {
  return {v.data(), dtype, std::move(shape), Device::Cpu()};
}

// A grouped allreduce of float64, int32, float64, int8 (sum), a grouped allgather of int16
// and float32, and a grouped reducescatter of int64 and float32, all checked exactly.
std::string RunMixedGroups(Runtime& rt) {
  const int rank = rt.rank();
  const int n = rt.size();
  std::vector<double> d1(7, 0.5 * (rank + 1)), d2(3, 2.0);
  std::vector<int32_t> i1(5, rank * 3);
  std::vector<int8_t> b1(4, 1);
  int calls = 0;
  std::promise<Status> done;
  Status s = rt.GroupedAllreduceAsync(
      {"m/d1", "m/i1", "m/d2", "m/b1"},
      {ViewOf(d1, DataType::kFloat64, {7}), ViewOf(i1, DataType::kInt32, {5}),
       ViewOf(d2, DataType::kFloat64, {3}), ViewOf(b1, DataType::kInt8, {4})},
      {ViewOf(d1, DataType::kFloat64, {7}), ViewOf(i1, DataType::kInt32, {5}),
       ViewOf(d2, DataType::kFloat64, {3}), ViewOf(b1, DataType::kInt8, {4})},
      {}, [&](const Status& st) {
        if (++calls == 1) done.set_value(st);
      });
  if (!s.ok()) return "grouped allreduce: " + s.ToString();
  s = done.get_future().get();
  if (!s.ok()) return "grouped allreduce: " + s.ToString();
  if (calls != 1) return "the callback ran " + std::to_string(calls) + " times";
  for (double v : d1) {
    if (v != 0.25 * n * (n + 1)) return "m/d1 is " + std::to_string(v);
  }
  for (double v : d2) {
    if (v != 2.0 * n) return "m/d2 is " + std::to_string(v);
  }
  for (int32_t v : i1) {
    if (v != 3 * n * (n - 1) / 2) return "m/i1 is " + std::to_string(v);
  }
  for (int8_t v : b1) {
    if (v != n) return "m/b1 is " + std::to_string(v);
  }

  std::vector<int16_t> h(static_cast<size_t>(rank + 1), static_cast<int16_t>(-rank));
  std::vector<float> f(2, static_cast<float>(rank) + 0.5f);
  std::vector<int16_t> h_out;
  std::vector<float> f_out;
  s = rt.GroupedAllgather(
      {"m/h", "m/f"}, {ViewOf(h, DataType::kInt16, {rank + 1}), ViewOf(f, DataType::kFloat32, {2})},
      {[&](const std::vector<int64_t>& shape) -> void* {
         h_out.resize(static_cast<size_t>(shape[0]));
         return h_out.data();
       },
       [&](const std::vector<int64_t>& shape) -> void* {
         f_out.resize(static_cast<size_t>(shape[0]));
         return f_out.data();
       }});
  if (!s.ok()) return "grouped allgather: " + s.ToString();
  std::vector<int16_t> h_want;
  std::vector<float> f_want;
  for (int r = 0; r < n; ++r) {
    h_want.insert(h_want.end(), static_cast<size_t>(r + 1), static_cast<int16_t>(-r));
    f_want.insert(f_want.end(), 2, static_cast<float>(r) + 0.5f);
  }
  if (h_out != h_want || f_out != f_want) return "grouped allgather: wrong data";

  std::vector<int64_t> l = {10, 20, 30, 40, 50};
  std::vector<float> g = {1, 2, 3};
  // Rank 3 of 4 receives no row of g; its buffer still has a data pointer (reducescatter
  // refuses a null output even when this rank's part is empty).
  const int64_t l_rows = ReducescatterShape({5}, rank, n)[0];
  const int64_t g_rows = ReducescatterShape({3}, rank, n)[0];
  std::vector<int64_t> l_part(static_cast<size_t>(l_rows) + 1);
  std::vector<float> g_part(static_cast<size_t>(g_rows) + 1);
  s = rt.GroupedReducescatter(
      {"m/l", "m/g"}, {ViewOf(l, DataType::kInt64, {5}), ViewOf(g, DataType::kFloat32, {3})},
      {ViewOf(l_part, DataType::kInt64, {l_rows}), ViewOf(g_part, DataType::kFloat32, {g_rows})});
  if (!s.ok()) return "grouped reducescatter: " + s.ToString();
  int64_t l_first = 0, g_first = 0;
  for (int r = 0; r < rank; ++r) {
    l_first += ReducescatterShape({5}, r, n)[0];
    g_first += ReducescatterShape({3}, r, n)[0];
  }
  for (int64_t k = 0; k < l_rows; ++k) {
    if (l_part[k] != n * l[l_first + k]) return "m/l: wrong data";
  }
  for (int64_t k = 0; k < g_rows; ++k) {
    if (g_part[k] != n * g[g_first + k]) return "m/g: wrong data";
  }
  return "";
}

}  // namespace

TEST_CASE("A mixed-dtype group is one callback and one transfer per dtype", "[runtime][grouped]") {
  const int size = GENERATE(1, 2, 3, 4);
  Watchdog watchdog("mixed-dtype groups", std::chrono::seconds(90));
  const kolo::testing::TempDir temp("kolo-mixed-");
  const std::string path = temp.path() + "/m.json";
  {
    LocalJob job(size, [&](Options& o) {
      o.fusion_threshold_bytes = 8;  // below every member: only the groups fuse them
      o.timeline_path = path;
    });
    auto failures = job.RunOnAllRanks([](Runtime& rt) -> std::string {
      for (int step = 0; step < 2; ++step) {  // the second step goes by cache id
        std::string failure = RunMixedGroups(rt);
        if (!failure.empty()) return "step " + std::to_string(step) + ": " + failure;
      }
      return "";
    });
    CHECK(failures == std::vector<std::string>{});
  }
  std::vector<std::string> files;
  for (int r = 0; r < size; ++r)
    files.push_back(temp.path() + "/m.rank" + std::to_string(r) + ".json");
  auto set = timeline::LoadTraceSet(files);
  REQUIRE(set.ok());
  timeline::TraceModel model = timeline::BuildTraceModel(*set);
  REQUIRE(model.ops.size() == static_cast<size_t>(size * 2 * 8));
  // Each op's response holds exactly the members of its group of its dtype.
  const std::map<std::string, int> per_dtype = {{"m/d1", 2}, {"m/d2", 2}, {"m/i1", 1}, {"m/b1", 1},
                                                {"m/h", 1},  {"m/f", 1},  {"m/l", 1},  {"m/g", 1}};
  for (const auto& op : model.ops) {
    INFO(op.tensor);
    REQUIRE(per_dtype.count(op.tensor) == 1);
    CHECK(op.group_size == per_dtype.at(op.tensor));
  }
}
