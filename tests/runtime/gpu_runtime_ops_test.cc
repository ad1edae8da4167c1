// GPU tensors through the whole runtime — real gRPC controller, real loopback mesh — on
// simulated GPUs (tests/support/sim_gpu): every op kind on both paths (nccl: GpuExecutor over
// simulated NCCL; ring: staged through host memory), mixed with CPU ops, the timeline's GPU
// phases, callbacks on a kolo thread, join. The agreement rules, the checks and the failures:
// gpu_runtime_checks_test.cc.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>

#include "core/op_validation.h"
#include "ops/cuda/cuda_backend.h"
#include "tests/runtime/gpu_runtime_support.h"
#include "tests/support/local_job.h"
#include "tests/support/sim_gpu/sim_backends.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::gpu_runtime_test;
using kolo::gpu::sim::FromDevice;
using kolo::gpu::sim::SimCollectives;
using kolo::gpu::sim::SimDevice;
using kolo::gpu::sim::SimGpuBackends;
using kolo::gpu::sim::ToDevice;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

// Device memory from a rank's allocator (allgather, alltoall), freed with the tester.
class DeviceOutputs {
 public:
  explicit DeviceOutputs(SimDevice* device) : device_(device) {}
  ~DeviceOutputs() {
    for (void* p : owned_) device_->Free(p).IgnoreError();  // checked through the results
  }
  Allocator For(DataType dtype, void** out, std::vector<int64_t>* shape) {
    return [this, dtype, out, shape](const std::vector<int64_t>& s) -> void* {
      int64_t elements = 1;
      for (int64_t d : s) elements *= d;
      StatusOr<void*> p = device_->Malloc(static_cast<size_t>(elements) * DataTypeSize(dtype) + 1);
      if (!p.ok()) return nullptr;
      owned_.push_back(*p);
      *out = *p;
      *shape = s;
      return *p;
    };
  }

 private:
  SimDevice* const device_;
  std::vector<void*> owned_;
};

// Every op kind on rank `rt`'s simulated GPU, results checked element by element.
std::string RunEveryOp(Runtime& rt, SimDevice* device) {
  if (device == nullptr) return "no simulated device for this rank";
  if (Status s = device->SetDevice(0); !s.ok()) return Fail("SetDevice", s);
  const int n = rt.size();
  const int rank = rt.rank();
  // Allreduce, out of place, every reduce op on float32; in place with scales on float64.
  for (ReduceOp op : kolo::testing::kAllOps) {
    const int64_t elements = 1000;
    DeviceTensor in(device, kolo::testing::MakeInput(DataType::kFloat32, elements, rank, op),
                    DataType::kFloat32, {elements});
    DeviceTensor out(device, std::vector<uint8_t>(elements * 4), DataType::kFloat32, {elements});
    if (!in.status().ok() || !out.status().ok()) return Fail("upload", in.status());
    AllreduceOptions options;
    options.op = op;
    const std::string name = "ar/" + ReduceOpName(op);
    if (Status s = rt.Allreduce(name, in.view(), out.view(), options); !s.ok()) {
      return Fail(name, s);
    }
    StatusOr<std::vector<uint8_t>> got = out.Read();
    if (!got.ok()) return Fail(name + " download", got.status());
    std::string wrong = kolo::testing::CheckAllreduce(*got, DataType::kFloat32, elements, n, op);
    if (!wrong.empty()) return name + ": " + wrong;
  }
  {
    DeviceTensor t(device,
                   kolo::testing::MakeInput(DataType::kFloat64, 77, rank, ReduceOp::kAverage),
                   DataType::kFloat64, {7, 11});
    AllreduceOptions options;
    options.op = ReduceOp::kAverage;
    options.prescale = 0.5;
    options.postscale = 2.0;
    if (Status s = rt.Allreduce("ar/scaled", t.view(), t.view(), options); !s.ok()) {
      return Fail("ar/scaled", s);
    }
    StatusOr<std::vector<uint8_t>> got = t.Read();
    if (!got.ok()) return Fail("ar/scaled download", got.status());
    std::string wrong =
        kolo::testing::CheckAllreduce(*got, DataType::kFloat64, 77, n, ReduceOp::kAverage);
    if (!wrong.empty()) return "ar/scaled: " + wrong;
  }
  // A grouped allreduce: fused on the device.
  {
    DeviceTensor a(device, kolo::testing::MakeInput(DataType::kInt32, 300, rank, ReduceOp::kSum),
                   DataType::kInt32, {300});
    DeviceTensor b(device, kolo::testing::MakeInput(DataType::kInt32, 5, rank, ReduceOp::kSum),
                   DataType::kInt32, {5});
    Status s = rt.GroupedAllreduce({"g/a", "g/b"}, {a.view(), b.view()}, {a.view(), b.view()});
    if (!s.ok()) return Fail("grouped", s);
    for (auto* t : {&a, &b}) {
      StatusOr<std::vector<uint8_t>> got = t->Read();
      if (!got.ok()) return Fail("grouped download", got.status());
      std::string wrong = kolo::testing::CheckAllreduce(
          *got, DataType::kInt32, t->view().num_elements(), n, ReduceOp::kSum);
      if (!wrong.empty()) return "grouped: " + wrong;
    }
  }
  // Broadcast from the last rank.
  {
    std::vector<uint8_t> mine =
        kolo::testing::MakeInput(DataType::kInt64, 50, rank, ReduceOp::kSum);
    DeviceTensor t(device, mine, DataType::kInt64, {50});
    if (Status s = rt.Broadcast("bc", t.view(), n - 1); !s.ok()) return Fail("bc", s);
    StatusOr<std::vector<uint8_t>> got = t.Read();
    if (!got.ok()) return Fail("bc download", got.status());
    if (*got != kolo::testing::MakeInput(DataType::kInt64, 50, n - 1, ReduceOp::kSum)) {
      return "bc: wrong data";
    }
  }
  // Allgather of rank + 1 rows of 3.
  {
    const int64_t rows = rank + 1;
    DeviceTensor in(device,
                    kolo::testing::MakeInput(DataType::kFloat32, rows * 3, rank, ReduceOp::kSum),
                    DataType::kFloat32, {rows, 3});
    DeviceOutputs outputs(device);
    void* out = nullptr;
    std::vector<int64_t> shape;
    if (Status s = rt.Allgather("ag", in.view(), outputs.For(DataType::kFloat32, &out, &shape));
        !s.ok()) {
      return Fail("ag", s);
    }
    std::vector<uint8_t> expected;
    for (int r = 0; r < n; ++r) {
      auto part = kolo::testing::MakeInput(DataType::kFloat32, (r + 1) * 3, r, ReduceOp::kSum);
      expected.insert(expected.end(), part.begin(), part.end());
    }
    StatusOr<std::vector<uint8_t>> got = FromDevice(*device, out, expected.size());
    if (!got.ok()) return Fail("ag download", got.status());
    if (*got != expected) return "ag: wrong data";
  }
  // A grouped allgather of rank + 1 and 2 rows of 2: fused on the device, one output each.
  {
    const std::vector<int64_t> rows = {rank + 1, 2};
    std::vector<std::unique_ptr<DeviceTensor>> ins;
    std::vector<TensorView> views;
    DeviceOutputs outputs(device);
    std::vector<void*> outs(2, nullptr);
    std::vector<std::vector<int64_t>> shapes(2);
    std::vector<Allocator> allocators;
    for (int t = 0; t < 2; ++t) {
      ins.push_back(std::make_unique<DeviceTensor>(
          device,
          kolo::testing::MakeInput(DataType::kInt32, rows[t] * 2, rank + 10 * t, ReduceOp::kSum),
          DataType::kInt32, std::vector<int64_t>{rows[t], 2}));
      views.push_back(ins.back()->view());
      allocators.push_back(outputs.For(DataType::kInt32, &outs[t], &shapes[t]));
    }
    if (Status s = rt.GroupedAllgather({"gag/a", "gag/b"}, views, allocators); !s.ok()) {
      return Fail("grouped allgather", s);
    }
    for (int t = 0; t < 2; ++t) {
      std::vector<uint8_t> expected;
      for (int r = 0; r < n; ++r) {
        auto part = kolo::testing::MakeInput(DataType::kInt32, (t == 0 ? r + 1 : 2) * 2, r + 10 * t,
                                             ReduceOp::kSum);
        expected.insert(expected.end(), part.begin(), part.end());
      }
      StatusOr<std::vector<uint8_t>> got = FromDevice(*device, outs[t], expected.size());
      if (!got.ok()) return Fail("grouped allgather download", got.status());
      if (*got != expected) return "grouped allgather: wrong data in member " + std::to_string(t);
    }
  }
  // Reducescatter of 2n + 1 rows of 2: rank r keeps its SplitRows part of the sum.
  {
    const int64_t rows = 2 * n + 1;
    DeviceTensor in(device,
                    kolo::testing::MakeInput(DataType::kFloat32, rows * 2, rank, ReduceOp::kSum),
                    DataType::kFloat32, {rows, 2});
    const std::vector<int64_t> parts = SplitRows(rows, n);
    int64_t first_row = 0;
    for (int r = 0; r < rank; ++r) first_row += parts[r];
    DeviceTensor out(device, std::vector<uint8_t>(parts[rank] * 2 * 4), DataType::kFloat32,
                     {parts[rank], 2});
    if (Status s = rt.Reducescatter("rs", in.view(), out.view()); !s.ok()) return Fail("rs", s);
    StatusOr<std::vector<uint8_t>> got = out.Read();
    if (!got.ok()) return Fail("rs download", got.status());
    for (int64_t i = 0; i < parts[rank] * 2; ++i) {
      const double want = kolo::testing::ExpectedAllreduce(n, first_row * 2 + i, ReduceOp::kSum,
                                                           DataType::kFloat32);
      const double have = kolo::testing::ReadElement(*got, DataType::kFloat32, i);
      if (have != want) {
        return "rs: element " + std::to_string(i) + " is " + std::to_string(have) + ", want " +
               std::to_string(want);
      }
    }
  }
  // Alltoall: rank s sends d + 1 rows of 2 to rank d; the rows carry (s, d).
  {
    std::vector<int64_t> splits;
    std::vector<int32_t> values;
    for (int d = 0; d < n; ++d) {
      splits.push_back(d + 1);
      for (int i = 0; i < (d + 1) * 2; ++i) values.push_back(rank * 100 + d * 10 + i);
    }
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    DeviceTensor in(device, bytes, DataType::kInt32, {static_cast<int64_t>(values.size() / 2), 2});
    DeviceOutputs outputs(device);
    void* out = nullptr;
    std::vector<int64_t> shape;
    std::vector<int64_t> received;
    if (Status s = rt.Alltoall("a2a", in.view(), splits,
                               outputs.For(DataType::kInt32, &out, &shape), &received);
        !s.ok()) {
      return Fail("a2a", s);
    }
    std::vector<int32_t> expected;
    for (int s = 0; s < n; ++s) {
      for (int i = 0; i < (rank + 1) * 2; ++i) expected.push_back(s * 100 + rank * 10 + i);
    }
    StatusOr<std::vector<uint8_t>> got = FromDevice(*device, out, expected.size() * 4);
    if (!got.ok()) return Fail("a2a download", got.status());
    std::vector<int32_t> have(expected.size());
    std::memcpy(have.data(), got->data(), got->size());
    if (have != expected) return "a2a: wrong data";
    if (received != std::vector<int64_t>(n, rank + 1)) return "a2a: wrong received splits";
  }
  // A CPU op in the same job, between GPU ops.
  {
    std::vector<uint8_t> host =
        kolo::testing::MakeInput(DataType::kFloat32, 64, rank, ReduceOp::kSum);
    TensorView view = kolo::testing::View(host, DataType::kFloat32, 64);
    if (Status s = rt.Allreduce("cpu", view, view); !s.ok()) return Fail("cpu", s);
    std::string wrong =
        kolo::testing::CheckAllreduce(host, DataType::kFloat32, 64, n, ReduceOp::kSum);
    if (!wrong.empty()) return "cpu: " + wrong;
  }
  return "";
}

}  // namespace

TEST_CASE("Every op kind runs on simulated GPUs through the runtime, on both paths",
          "[runtime][gpu-sim]") {
  const GpuOperations path = GENERATE(GpuOperations::kNccl, GpuOperations::kRing);
  const int size = GENERATE(1, 3);
  INFO("KOLO_GPU_OPERATIONS=" << (path == GpuOperations::kNccl ? "nccl" : "ring") << ", " << size
                              << " ranks");
  Watchdog watchdog("GPU ops through the runtime", std::chrono::seconds(120));
  SimGpuBackends::Options slow;  // a missing wait for the device shows up as wrong data
  slow.device.op_delay = std::chrono::microseconds(300);
  SimGpuBackends sims(slow);
  LocalJob job(size, [path](Options& o) { o.gpu_operations = path; });
  for (const std::string& failure :
       job.RunOnAllRanks([&](Runtime& rt) { return RunEveryOp(rt, sims.device(rt.rank())); })) {
    FAIL_CHECK(failure);
  }
  for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
}

TEST_CASE("The timeline shows a GPU op's phases, timed by the device's events",
          "[runtime][gpu-sim]") {
  Watchdog watchdog("GPU timeline", std::chrono::seconds(60));
  SimGpuBackends sims;
  kolo::testing::TempDir dir;
  LocalJob job(2);
  for (const std::string& failure : job.RunOnAllRanks([&](Runtime& rt) -> std::string {
         SimDevice* device = sims.device(rt.rank());
         if (Status s = device->SetDevice(0); !s.ok()) return Fail("SetDevice", s);
         if (Status s = rt.StartTimeline(dir.File("gpu.json")); !s.ok()) {
           return Fail("start_timeline", s);
         }
         DeviceTensor a(device, std::vector<uint8_t>(400), DataType::kFloat32, {100});
         DeviceTensor b(device, std::vector<uint8_t>(400), DataType::kFloat32, {100});
         // Fused: the copies into and out of the fusion buffer are phases too.
         Status s = rt.GroupedAllreduce({"t/a", "t/b"}, {a.view(), b.view()}, {a.view(), b.view()});
         if (!s.ok()) return Fail("grouped", s);
         if (Status stopped = rt.StopTimeline(); !stopped.ok()) return Fail("stop", stopped);
         // Each rank writes its own file: the path with ".rank<r>" before the extension.
         std::ifstream file(dir.File("gpu.rank" + std::to_string(rt.rank()) + ".json"));
         std::stringstream text;
         text << file.rdbuf();
         for (const char* phase :
              {"MEMCPY_IN_FUSION_BUFFER", "NCCL_ALLREDUCE", "MEMCPY_OUT_FUSION_BUFFER"}) {
           if (text.str().find(phase) == std::string::npos) {
             return std::string("no ") + phase + " in the timeline";
           }
         }
         return "";
       })) {
    FAIL_CHECK(failure);
  }
  for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
}

TEST_CASE("A GPU op's callback runs on a kolo thread: blocking calls from it fail at once",
          "[runtime][gpu-sim]") {
  Watchdog watchdog("GPU callback thread", std::chrono::seconds(60));
  SimGpuBackends sims;
  LocalJob job(1);
  Runtime& rt = job.rank(0);
  SimDevice* device = sims.device(0);
  REQUIRE(device->SetDevice(0).ok());
  DeviceTensor t(device, std::vector<uint8_t>(40), DataType::kFloat32, {10});
  std::promise<Status> inner;
  REQUIRE(rt.AllreduceAsync("outer", t.view(), t.view(), {}, [&](const Status& s) {
              // (Catch's assertions are not thread-safe: the test thread checks the result.)
              inner.set_value(s.ok() ? rt.Allreduce("inner", t.view(), t.view()) : s);
            }).ok());
  std::future<Status> result = inner.get_future();
  REQUIRE(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const Status s = result.get();
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(s.message(), Catch::Contains("callback"));
  CHECK(rt.Shutdown().ok());  // the runtime (and its device) outlive `t`; the job frees them
}

TEST_CASE("A joined rank contributes zeros on its GPU", "[runtime][gpu-sim]") {
  const GpuOperations path = GENERATE(GpuOperations::kNccl, GpuOperations::kRing);
  Watchdog watchdog("join with GPU tensors", std::chrono::seconds(60));
  SimGpuBackends sims;
  LocalJob job(2, [path](Options& o) { o.gpu_operations = path; });
  for (const std::string& failure : job.RunOnAllRanks([&](Runtime& rt) -> std::string {
         SimDevice* device = sims.device(rt.rank());
         if (Status s = device->SetDevice(0); !s.ok()) return Fail("SetDevice", s);
         if (rt.rank() == 1) {
           StatusOr<int> last = rt.Join();
           return last.ok() ? "" : Fail("join", last.status());
         }
         std::vector<uint8_t> mine =
             kolo::testing::MakeInput(DataType::kFloat32, 100, 0, ReduceOp::kSum);
         DeviceTensor t(device, mine, DataType::kFloat32, {100});
         if (Status s = rt.Allreduce("alone", t.view(), t.view()); !s.ok()) return Fail("alone", s);
         StatusOr<std::vector<uint8_t>> got = t.Read();
         if (!got.ok()) return Fail("download", got.status());
         if (*got != mine) return "rank 1's zeros changed rank 0's values";
         StatusOr<int> last = rt.Join();
         return last.ok() ? "" : Fail("join", last.status());
       })) {
    FAIL_CHECK(failure);
  }
  for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
}
