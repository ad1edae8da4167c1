// GPU tensors through the whole runtime on simulated GPUs (tests/support/sim_gpu): the device
// agreement rules, the enqueue-time checks, the path agreement at the first GPU op, an NCCL
// error, a communicator init past the deadline, out of device memory, a restart, ring without
// NCCL. The last cases run the real CUDA backend of this build: on a machine without a GPU they
// must fail at once, in CUDA's words, on every rank. Every op kind: gpu_runtime_ops_test.cc.
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
