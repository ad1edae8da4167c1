// GPU tensors through the whole runtime — real gRPC controller, real loopback mesh — on
// simulated GPUs (tests/support/sim_gpu): every op kind on both paths (nccl: GpuExecutor over
// simulated NCCL; ring: staged through host memory), mixed with CPU ops, join, the device
// agreement rules, the enqueue-time checks, and the path agreement at the first GPU op.
// The last cases run the real CUDA backend of this build: on a machine without a GPU they
// must fail at once, in CUDA's words, on every rank.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>

#include "core/op_validation.h"
#include "ops/cuda/cuda_backend.h"
#include "tests/support/local_job.h"
#include "tests/support/sim_gpu/sim_backends.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::gpu::sim::FromDevice;
using kolo::gpu::sim::SimCollectives;
using kolo::gpu::sim::SimDevice;
using kolo::gpu::sim::SimGpuBackends;
using kolo::gpu::sim::ToDevice;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

// Device memory of one rank, freed when it goes.
class DeviceTensor {
 public:
  DeviceTensor(SimDevice* device, const std::vector<uint8_t>& bytes, DataType dtype,
               std::vector<int64_t> shape)
      : device_(device), dtype_(dtype), shape_(std::move(shape)) {
    StatusOr<void*> ptr = ToDevice(*device_, bytes);
    status_ = ptr.status();
    if (ptr.ok()) ptr_ = *ptr;
  }
  ~DeviceTensor() {
    if (ptr_ != nullptr) device_->Free(ptr_).IgnoreError();  // the test checked what it needs
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  const Status& status() const { return status_; }
  TensorView view() const { return TensorView{ptr_, dtype_, shape_, Device::Cuda(0)}; }
  StatusOr<std::vector<uint8_t>> Read() const {
    return FromDevice(*device_, ptr_, view().num_bytes());
  }

 private:
  SimDevice* const device_;
  const DataType dtype_;
  const std::vector<int64_t> shape_;
  void* ptr_ = nullptr;
  Status status_;
};

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

std::string Fail(const std::string& what, const Status& s) {
  return what + ": " + s.ToString();
}

// A sum of 10 floats on `device`'s cuda:0, checked; "" when right.
std::string SmallAllreduce(Runtime& rt, SimDevice* device, const std::string& name) {
  if (Status s = device->SetDevice(0); !s.ok()) return Fail("SetDevice", s);
  std::vector<uint8_t> in =
      kolo::testing::MakeInput(DataType::kFloat32, 10, rt.rank(), ReduceOp::kSum);
  DeviceTensor t(device, in, DataType::kFloat32, {10});
  if (Status s = rt.Allreduce(name, t.view(), t.view()); !s.ok()) return Fail(name, s);
  StatusOr<std::vector<uint8_t>> got = t.Read();
  if (!got.ok()) return Fail(name + " download", got.status());
  return kolo::testing::CheckAllreduce(*got, DataType::kFloat32, 10, rt.size(), ReduceOp::kSum);
}

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

TEST_CASE("Ranks agree on CPU or GPU, not on the GPU's index", "[runtime][gpu-sim]") {
  Watchdog watchdog("device agreement", std::chrono::seconds(60));
  SimGpuBackends::Options two_gpus;
  two_gpus.device.device_count = 2;
  SimGpuBackends sims(two_gpus);
  LocalJob job(2);
  std::vector<std::string> results = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    SimDevice* device = sims.device(rt.rank());
    // Rank 0 on cuda:0, rank 1 on cuda:1: the normal case.
    const int index = rt.rank();
    if (Status s = device->SetDevice(index); !s.ok()) return Fail("SetDevice", s);
    std::vector<uint8_t> values =
        kolo::testing::MakeInput(DataType::kFloat32, 10, rt.rank(), ReduceOp::kSum);
    StatusOr<void*> ptr = ToDevice(*device, values);
    if (!ptr.ok()) return Fail("upload", ptr.status());
    TensorView t{*ptr, DataType::kFloat32, {10}, Device::Cuda(index)};
    Status s = rt.Allreduce("indices", t, t);
    std::string result = s.ok() ? "" : Fail("indices", s);
    // Then one rank on the CPU for a name the other has on its GPU: a mismatch on both.
    TensorView host = kolo::testing::View(values, DataType::kFloat32, 10);
    s = rt.Allreduce("cpu-vs-gpu", rt.rank() == 0 ? t : host, rt.rank() == 0 ? t : host);
    device->Free(*ptr).IgnoreError();  // the results say what matters
    if (s.code() != StatusCode::kMismatch) return result + " cpu-vs-gpu: " + s.ToString();
    return result + s.message();
  });
  const std::string mismatch =
      "Mismatched devices for 'cpu-vs-gpu': rank 0 sent cuda:0, rank 1 sent cpu";
  CHECK_THAT(results[0], Catch::Contains(mismatch));
  CHECK_THAT(results[1], Catch::Contains(mismatch));
  CHECK_THAT(results[0], !Catch::Contains("indices"));
  CHECK_THAT(results[1], !Catch::Contains("indices"));
  for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
}

TEST_CASE("GPU ops are checked at enqueue: device memory, one GPU per rank, NCCL's scaling",
          "[runtime][gpu-sim]") {
  Watchdog watchdog("enqueue checks", std::chrono::seconds(60));
  SimGpuBackends::Options two_gpus;
  two_gpus.device.device_count = 2;
  SimGpuBackends sims(two_gpus);
  LocalJob job(1, [](Options& o) { o.gpu_operations = GpuOperations::kNccl; });
  Runtime& rt = job.rank(0);
  SimDevice* device = sims.device(0);
  REQUIRE(device->SetDevice(0).ok());
  std::vector<uint8_t> values(40);
  StatusOr<void*> ptr = ToDevice(*device, values);
  REQUIRE(ptr.ok());
  const TensorView on0{*ptr, DataType::kFloat32, {10}, Device::Cuda(0)};
  auto refused = [&](const std::string& name, TensorView in, TensorView out,
                     AllreduceOptions options = {}) {
    const auto start = std::chrono::steady_clock::now();
    Status s = rt.Allreduce(name, in, out, options);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
    CHECK(s.code() == StatusCode::kInvalidArgument);
    return s.message();
  };
  SECTION("a host pointer passed as device memory") {
    TensorView host = on0;
    host.data = values.data();
    CHECK_THAT(refused("host", host, host),
               Catch::StartsWith("allreduce 'host': the input is not device memory of cuda:0"));
  }
  SECTION("a GPU this process does not have") {
    TensorView far = on0;
    far.device = Device::Cuda(2);
    CHECK_THAT(refused("far", far, far),
               Catch::Equals("allreduce 'far' is on cuda:2, but this process sees 2 GPU(s)"));
  }
  SECTION("a second GPU on one rank") {
    REQUIRE(rt.Allreduce("first", on0, on0).ok());
    REQUIRE(device->SetDevice(1).ok());
    StatusOr<void*> other = ToDevice(*device, values);
    REQUIRE(other.ok());
    const TensorView on1{*other, DataType::kFloat32, {10}, Device::Cuda(1)};
    CHECK_THAT(refused("second", on1, on1),
               Catch::Contains("this rank's earlier GPU ops ran on cuda:0; kolo uses one GPU "
                               "per rank"));
    CHECK(device->Free(*other).ok());
  }
  SECTION("a dtype NCCL does not have") {
    TensorView shorts = on0;
    shorts.dtype = DataType::kInt16;
    shorts.shape = {20};
    CHECK_THAT(refused("shorts", shorts, shorts),
               Catch::Equals("allreduce 'shorts': NCCL has no int16 type; convert the tensor, or "
                             "run KOLO_GPU_OPERATIONS=ring"));
  }
  SECTION("a scale NCCL cannot express") {
    AllreduceOptions options;
    options.op = ReduceOp::kMax;
    options.prescale = 2;
    CHECK_THAT(refused("scaled-max", on0, on0, options),
               Catch::Contains("NCCL scales only floating-point sums and averages"));
  }
  CHECK(rt.Shutdown().ok());
  // After shutdown() a GPU op fails as every op does (the runtime's GPU libraries stay until
  // the runtime object goes).
  CHECK(rt.Allreduce("late", on0, on0).code() == StatusCode::kShutdown);
  CHECK(device->Free(*ptr).ok());
}

TEST_CASE("Ranks on different GPU paths fail at the first GPU op, naming them",
          "[runtime][gpu-sim]") {
  Watchdog watchdog("path agreement", std::chrono::seconds(60));
  SimGpuBackends sims;
  LocalJob job(2, [](Options& o) {
    o.gpu_operations = o.rank == 0 ? GpuOperations::kNccl : GpuOperations::kRing;
  });
  std::vector<std::string> results = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    SimDevice* device = sims.device(rt.rank());
    if (Status s = device->SetDevice(0); !s.ok()) return Fail("SetDevice", s);
    DeviceTensor t(device, std::vector<uint8_t>(40), DataType::kFloat32, {10});
    return rt.Allreduce("first-gpu-op", t.view(), t.view()).message();
  });
  for (const std::string& r : results) {
    CHECK_THAT(r, Catch::Contains("KOLO_GPU_OPERATIONS must be the same on every rank"));
    CHECK_THAT(r, Catch::Contains("rank 0: nccl") || Catch::Contains("rank 1: ring"));
  }
  job.ShutdownAll();  // the job failed: its statuses repeat the error
}

TEST_CASE("An NCCL error on one rank fails the job on every rank with that rank's root cause",
          "[runtime][gpu-sim]") {
  const auto fault = GENERATE(SimCollectives::Fault::kAsyncError, SimCollectives::Fault::kHang);
  Watchdog watchdog("a GPU fault", std::chrono::seconds(60));
  SimGpuBackends::Options options;
  options.per_rank = [fault](int rank, SimCollectives::Options* o) {
    if (rank != 1) return;
    o->fault = fault;
    o->fault_after_ops = 1;  // the second collective fails
  };
  SimGpuBackends sims(options);
  LocalJob job(2, [](Options& o) { o.timeout_seconds = 3; });
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> results = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    SimDevice* device = sims.device(rt.rank());
    if (Status s = device->SetDevice(0); !s.ok()) return Fail("SetDevice", s);
    DeviceTensor t(device, std::vector<uint8_t>(400), DataType::kFloat32, {100});
    if (Status s = rt.Allreduce("fine", t.view(), t.view()); !s.ok()) return Fail("fine", s);
    Status failed = rt.Allreduce("faulty", t.view(), t.view());
    if (failed.ok()) return "the faulty op succeeded";
    // The job is over: the next op fails at once with the same root cause.
    Status after = rt.Allreduce("after", t.view(), t.view());
    if (after.ok()) return "an op after the fault succeeded";
    return failed.message();
  });
  const auto took = std::chrono::steady_clock::now() - start;
  // An async error names its rank. A hang ends at the deadline of whichever rank's completion
  // thread sees it first; the other rank then sees its peer's communicator go away.
  for (const std::string& r : results) {
    if (fault == SimCollectives::Fault::kAsyncError) {
      CHECK_THAT(r, Catch::Contains("'faulty': ncclAllReduce: ncclRemoteError (6)") &&
                        Catch::Contains("simulated async error on rank 1"));
    } else {
      CHECK_THAT(r, Catch::Contains("'faulty': the device did not finish it within 3 s "
                                    "(KOLO_TIMEOUT_SECONDS)") ||
                        Catch::Contains("'faulty': ncclAllReduce: ncclRemoteError (6)"));
    }
  }
  // The hang ends at the op deadline (3 s) plus the job's abort; never the test's watchdog.
  CHECK(took < std::chrono::seconds(15));
  job.ShutdownAll();  // the job failed: its statuses repeat the root cause
}

TEST_CASE("A communicator init past KOLO_TIMEOUT_SECONDS fails on every rank, naming the ranks",
          "[runtime][gpu-sim]") {
  Watchdog watchdog("a late communicator", std::chrono::seconds(60));
  SimGpuBackends::Options options;
  options.per_rank = [](int rank, SimCollectives::Options* o) {
    if (rank == 1) o->init_delay = std::chrono::seconds(20);  // ended by the abort
  };
  SimGpuBackends sims(options);
  LocalJob job(2, [](Options& o) { o.timeout_seconds = 2; });
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> results = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    SimDevice* device = sims.device(rt.rank());
    if (Status s = device->SetDevice(0); !s.ok()) return Fail("SetDevice", s);
    DeviceTensor t(device, std::vector<uint8_t>(40), DataType::kFloat32, {10});
    return rt.Allreduce("first", t.view(), t.view()).message();
  });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  for (const std::string& r : results) {
    CHECK_THAT(r, Catch::Contains("creating the NCCL communicator (nccl-sim, 2 ranks"));
    CHECK_THAT(r, Catch::Contains("rank 1 did not finish within 2 s"));
  }
  job.ShutdownAll();  // the job failed: its statuses repeat the error
}

TEST_CASE("Out of device memory for the fusion buffer fails the job, saying so",
          "[runtime][gpu-sim]") {
  Watchdog watchdog("out of device memory", std::chrono::seconds(60));
  SimGpuBackends::Options small;
  small.device.memory_per_device = 64 << 10;  // the tensors fit; a 64 MiB fusion buffer does not
  SimGpuBackends sims(small);
  LocalJob job(2);
  std::vector<std::string> results = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    SimDevice* device = sims.device(rt.rank());
    if (Status s = device->SetDevice(0); !s.ok()) return Fail("SetDevice", s);
    DeviceTensor a(device, std::vector<uint8_t>(4000), DataType::kFloat32, {1000});
    DeviceTensor b(device, std::vector<uint8_t>(4000), DataType::kFloat32, {1000});
    return rt.GroupedAllreduce({"a", "b"}, {a.view(), b.view()}, {a.view(), b.view()}).message();
  });
  for (const std::string& r : results) CHECK_THAT(r, Catch::Contains("out of memory"));
  job.ShutdownAll();  // the job failed: its statuses repeat the error
}

TEST_CASE("The GPU path works again after shutdown() and a new init()", "[runtime][gpu-sim]") {
  Watchdog watchdog("re-init", std::chrono::seconds(60));
  SimGpuBackends sims;
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    LocalJob job(2);
    for (const std::string& failure : job.RunOnAllRanks(
             [&](Runtime& rt) { return SmallAllreduce(rt, sims.device(rt.rank()), "again"); })) {
      FAIL_CHECK(failure);
    }
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
}

TEST_CASE("Without NCCL, ring runs GPU tensors and an explicit nccl fails init()",
          "[runtime][gpu-sim]") {
  Watchdog watchdog("no NCCL", std::chrono::seconds(60));
  SimGpuBackends::Options no_nccl;
  no_nccl.with_collectives = false;
  SimGpuBackends sims(no_nccl);
  {
    LocalJob job(2);  // auto: ring
    for (const std::string& failure : job.RunOnAllRanks(
             [&](Runtime& rt) { return SmallAllreduce(rt, sims.device(rt.rank()), "staged"); })) {
      FAIL_CHECK(failure);
    }
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  Options options;
  options.gpu_operations = GpuOperations::kNccl;
  StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(options);
  REQUIRE_FALSE(rt.ok());
  CHECK_THAT(rt.status().message(),
             Catch::Contains("KOLO_GPU_OPERATIONS=nccl: kolo was built without NCCL") &&
                 Catch::Contains("KOLO_GPU_OPERATIONS=ring runs GPU tensors without NCCL"));
}

namespace {

// The GPUs this build's real CUDA backend sees on this machine (0 without a driver).
int RealGpuCount() {
  StatusOr<std::unique_ptr<gpu::DeviceApi>> api = gpu::NewCudaDeviceApi();
  if (!api.ok()) return 0;
  StatusOr<int> count = (*api)->DeviceCount();
  return count.ok() ? *count : 0;
}

}  // namespace

TEST_CASE("Without a usable GPU, GPU tensors fail at enqueue within a second, in CUDA's words",
          "[runtime][gpu]") {
  Watchdog watchdog("no driver", std::chrono::seconds(60));
  // The real backends of this build, on this machine (no GPU here: no driver), or a simulated
  // device without a driver where there is one.
  SimGpuBackends::Options no_driver;
  no_driver.device.no_driver = true;
  const bool simulated = GENERATE(false, true);
  std::unique_ptr<SimGpuBackends> sims;
  if (simulated) sims = std::make_unique<SimGpuBackends>(no_driver);
  LocalJob job(2);
  std::vector<std::string> results = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    float host[4] = {};
    TensorView t{host, DataType::kFloat32, {4}, Device::Cuda(0)};
    const auto start = std::chrono::steady_clock::now();
    Status s = rt.Allreduce("on-gpu", t, t);
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(1)) return "too slow";
    return s.message();
  });
  // On a machine with a GPU the real backend finds it and refuses the host array instead.
  const bool real_gpu = !simulated && RealGpuCount() > 0;
  for (const std::string& r : results) {
    INFO(r);
    if (real_gpu) {
      CHECK_THAT(r, Catch::Contains("allreduce 'on-gpu': the input is not device memory of "
                                    "cuda:0"));
      continue;
    }
    const bool built_without = r.find("kolo was built without CUDA") != std::string::npos;
    CHECK((built_without ||
           r.find("no usable CUDA driver (cudaGetDeviceCount: cudaError") != std::string::npos));
    CHECK_THAT(r, Catch::Contains(": allreduce 'on-gpu' is on cuda:0, but "));
  }
  for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  if (RealGpuCount() > 0) return;  // what follows needs a machine without one
  // Asked for explicitly, the GPU path fails init() instead, naming the variable.
  Options options;
  options.gpu_operations = GpuOperations::kNccl;
  StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(options);
  REQUIRE_FALSE(rt.ok());
  CHECK_THAT(rt.status().message(), Catch::Contains("KOLO_GPU_OPERATIONS=nccl"));
}
