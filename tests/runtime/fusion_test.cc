// Fusion of allgathers and of reducescatters through the public API, over real gRPC and
// loopback sockets: many tensors in flight at once share transfers (seen in the timeline) and
// each still gets exactly its own result, for uneven first dimensions and every dtype.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <future>
#include <memory>

#include "core/op_validation.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"
#include "tools/timeline/trace_model.h"
#include "tools/timeline/trace_set.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

using kolo::testing::kAllDataTypes;

// Tensor t of rank r: rows that differ per tensor and rank (zero for some), columns per tensor.
int64_t Rows(int t, int rank) {
  return (t + rank) % 3 == 0 ? 0 : 1 + (5 * t + 3 * rank) % 11;
}
int64_t Cols(int t) {
  return 1 + t % 4;
}

// Values seeded per (tensor, rank), so a block put in another tensor's place shows.
std::vector<uint8_t> GatherInput(DataType dtype, int t, int rank) {
  return kolo::testing::MakeInput(dtype, Rows(t, rank) * Cols(t), rank + 7 * t, ReduceOp::kSum);
}

struct GatherSlot {
  std::vector<uint8_t> input;
  std::vector<uint8_t> output;
  std::vector<int64_t> shape;
  std::promise<Status> done;
};

// Enqueues `tensors` allgathers of each dtype at once, waits for all, checks every output.
std::string GatherMany(Runtime& rt, int tensors, int step) {
  std::vector<std::unique_ptr<GatherSlot>> slots;
  std::vector<std::string> names;
  for (DataType dtype : kAllDataTypes) {
    for (int t = 0; t < tensors; ++t) {
      auto slot = std::make_unique<GatherSlot>();
      slot->input = GatherInput(dtype, t, rt.rank());
      GatherSlot* s = slot.get();
      const std::string name =
          "ag/" + DataTypeName(dtype) + "/" + std::to_string(t) + "/" + std::to_string(step);
      TensorView view{s->input.data(), dtype, {Rows(t, rt.rank()), Cols(t)}, Device::Cpu()};
      const size_t element = DataTypeSize(dtype);
      Status st = rt.AllgatherAsync(
          name, view,
          [s, element](const std::vector<int64_t>& shape) -> void* {
            s->shape = shape;
            s->output.resize(static_cast<size_t>(shape[0] * shape[1]) * element + 1);
            return s->output.data();
          },
          [s](const Status& status) { s->done.set_value(status); });
      if (!st.ok()) return name + ": " + st.ToString();
      names.push_back(name);
      slots.push_back(std::move(slot));
    }
  }
  size_t i = 0;
  for (DataType dtype : kAllDataTypes) {
    for (int t = 0; t < tensors; ++t, ++i) {
      GatherSlot& s = *slots[i];
      Status st = s.done.get_future().get();
      if (!st.ok()) return names[i] + ": " + st.ToString();
      std::vector<uint8_t> expected;
      int64_t rows = 0;
      for (int r = 0; r < rt.size(); ++r) {
        std::vector<uint8_t> part = GatherInput(dtype, t, r);
        expected.insert(expected.end(), part.begin(), part.end());
        rows += Rows(t, r);
      }
      if (s.shape != std::vector<int64_t>{rows, Cols(t)}) {
        return names[i] + ": allocator got shape " + ShapeToString(s.shape);
      }
      s.output.resize(expected.size());
      if (s.output != expected)
        return names[i] + ": wrong data on rank " + std::to_string(rt.rank());
    }
  }
  return "";
}

struct ScatterSlot {
  std::vector<uint8_t> input;
  std::vector<uint8_t> output;
  std::promise<Status> done;
};

// Enqueues `tensors` reducescatters of one dtype and op at once (rows differ per tensor, so
// a part put in another tensor's place shows), waits for all, checks every part.
std::string ScatterMany(Runtime& rt, DataType dtype, ReduceOp op, int tensors, int step) {
  std::vector<std::unique_ptr<ScatterSlot>> slots;
  std::vector<std::string> names;
  const int64_t cols = 3;
  auto rows_of = [&](int t) { return int64_t{2 * t + t % 2 * rt.size()}; };
  for (int t = 0; t < tensors; ++t) {
    auto slot = std::make_unique<ScatterSlot>();
    ScatterSlot* s = slot.get();
    const int64_t rows = rows_of(t);
    s->input = kolo::testing::MakeInput(dtype, rows * cols, rt.rank(), op);
    const std::vector<int64_t> part = ReducescatterShape({rows, cols}, rt.rank(), rt.size());
    s->output.assign(static_cast<size_t>(part[0] * cols) * DataTypeSize(dtype), 0xCD);
    const std::string name = "rs/" + DataTypeName(dtype) + "/" + ReduceOpName(op) + "/" +
                             std::to_string(t) + "/" + std::to_string(step);
    AllreduceOptions options;
    options.op = op;
    Status st = rt.ReducescatterAsync(name, {s->input.data(), dtype, {rows, cols}, Device::Cpu()},
                                      {s->output.data(), dtype, part, Device::Cpu()}, options,
                                      [s](const Status& status) { s->done.set_value(status); });
    if (!st.ok()) return name + ": " + st.ToString();
    names.push_back(name);
    slots.push_back(std::move(slot));
  }
  for (int t = 0; t < tensors; ++t) {
    ScatterSlot& s = *slots[t];
    Status st = s.done.get_future().get();
    if (!st.ok()) return names[t] + ": " + st.ToString();
    int64_t first_row = 0;
    for (int r = 0; r < rt.rank(); ++r) {
      first_row += ReducescatterShape({rows_of(t), cols}, r, rt.size())[0];
    }
    const int64_t count = static_cast<int64_t>(s.output.size() / DataTypeSize(dtype));
    for (int64_t i = 0; i < count; ++i) {
      const double want =
          kolo::testing::ExpectedAllreduce(rt.size(), first_row * cols + i, op, dtype);
      const double got = kolo::testing::ReadElement(s.output, dtype, i);
      const double tolerance = IsFloatingPoint(dtype) ? 1e-2 * std::max(1.0, std::abs(want)) : 0;
      if (std::abs(got - want) > tolerance) {
        return names[t] + ": element " + std::to_string(i) + " of rank " +
               std::to_string(rt.rank()) + " is " + std::to_string(got) + ", expected " +
               std::to_string(want);
      }
    }
  }
  return "";
}

// The largest number of tensors one response of `op` carried, over all ranks' timelines.
int64_t LargestFusion(const std::string& dir, int n, const std::string& op) {
  std::vector<std::string> files;
  for (int r = 0; r < n; ++r) files.push_back(dir + "/f.rank" + std::to_string(r) + ".json");
  auto set = timeline::LoadTraceSet(files);
  if (!set.ok()) return -1;
  int64_t largest = 0;
  for (const auto& span : timeline::BuildTraceModel(*set).ops) {
    if (span.op == op) largest = std::max(largest, span.group_size);
  }
  return largest;
}

}  // namespace

TEST_CASE("Allgathers and reducescatters in flight at once fuse; each gets its own result",
          "[runtime][fusion]") {
  const int n = GENERATE(1, 2, 3, 4);
  Watchdog watchdog("allgather/reducescatter fusion with " + std::to_string(n) + " ranks",
                    std::chrono::seconds(120));
  const kolo::testing::TempDir temp("kolo-fusion-");
  const std::string& dir = temp.path();
  {
    LocalJob job(n, [&](Options& o) {
      // A wide cycle window so that a burst of enqueues is planned together.
      o.cycle_time_ms = 20;
      o.timeline_path = dir + "/f.json";
    });
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      for (int step = 0; step < 2; ++step) {  // the second step goes by cache id (reducescatter)
        std::string e = GatherMany(rt, 6, step);
        if (!e.empty()) return e;
        for (DataType dtype : kAllDataTypes) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
            if (!kolo::testing::HasReduceOp(dtype, op)) continue;
            e = ScatterMany(rt, dtype, op, 5, step);
            if (!e.empty()) return e;
          }
        }
      }
      return "";
    });
    CHECK(failures == std::vector<std::string>{});
  }
  CHECK(LargestFusion(dir, n, "ALLGATHER") > 1);
  CHECK(LargestFusion(dir, n, "REDUCESCATTER") > 1);
}

TEST_CASE("Fused allgathers: an allocator that fails on one rank fails only that tensor there",
          "[runtime][fusion][errors]") {
  Watchdog watchdog("fused allgather with a failing allocator", std::chrono::seconds(60));
  LocalJob job(3, [](Options& o) { o.cycle_time_ms = 20; });
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    float rows[4] = {1.0f * rt.rank(), 2, 3, 4};
    std::vector<float> good(64, -1), other(64, -1), third(64, -1);
    std::promise<Status> a_done, b_done, c_done;
    TensorView view{rows, DataType::kFloat32, {2, 2}, Device::Cpu()};
    auto into = [](std::vector<float>& v) {
      return [&v](const std::vector<int64_t>&) -> void* { return v.data(); };
    };
    auto none = [](const std::vector<int64_t>&) -> void* { return nullptr; };
    Status s =
        rt.AllgatherAsync("a", view, into(good), [&](const Status& st) { a_done.set_value(st); });
    if (s.ok()) {
      s = rt.AllgatherAsync("b", view, rt.rank() == 1 ? Allocator(none) : into(other),
                            [&](const Status& st) { b_done.set_value(st); });
    }
    if (s.ok()) {
      s = rt.AllgatherAsync("c", view, into(third),
                            [&](const Status& st) { c_done.set_value(st); });
    }
    if (!s.ok()) return s.ToString();
    Status a = a_done.get_future().get(), b = b_done.get_future().get();
    Status c = c_done.get_future().get();
    if (!a.ok() || !c.ok()) return "a or c failed: " + a.ToString() + " / " + c.ToString();
    if (rt.rank() == 1) {
      if (b.code() != StatusCode::kInvalidArgument ||
          b.message().find("allocator returned no memory") == std::string::npos) {
        return "expected b's allocator failure, got " + b.ToString();
      }
    } else if (!b.ok()) {
      return "b failed on rank " + std::to_string(rt.rank()) + ": " + b.ToString();
    }
    for (int r = 0; r < rt.size(); ++r) {
      if (good[4 * r] != 1.0f * r || good[4 * r + 3] != 4) return "wrong data in a";
      if (third[4 * r] != 1.0f * r || third[4 * r + 3] != 4) return "wrong data in c";
      if (rt.rank() != 1 && other[4 * r + 1] != 2) return "wrong data in b";
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}
