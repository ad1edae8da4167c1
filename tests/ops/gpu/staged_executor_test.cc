// StagedExecutor (KOLO_GPU_OPERATIONS=ring): tensors in simulated device memory through the
// real CPU executor over real loopback TCP, 1-4 thread ranks, each with its own simulated GPU
// (which, like a real one, faults on any host access to its memory). Results are read back
// from the device and checked element by element.
#include "ops/gpu/staged_executor.h"

#include <catch2/catch.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "ops/cpu_executor.h"
#include "tests/support/loopback_mesh.h"
#include "tests/support/sim_gpu/sim_device.h"
#include "tests/support/watchdog.h"

namespace kolo::gpu {
namespace {

using namespace std::chrono_literals;

// Synchronous host <-> device copies for setting up and checking (not under test).
class Host {
 public:
  explicit Host(DeviceApi& dev) : dev_(dev) {
    stream_ = *dev_.CreateStream(false);
    event_ = *dev_.CreateEvent(false);
  }
  ~Host() {
    dev_.DestroyEvent(event_).IgnoreError();
    dev_.DestroyStream(stream_).IgnoreError();
  }
  void* Upload(const std::vector<float>& v) {
    void* p = *dev_.Malloc(v.size() * sizeof(float));
    Copy(p, v.data(), v.size() * sizeof(float), CopyKind::kHostToDevice);
    return p;
  }
  std::vector<float> Download(const void* p, size_t n) {
    std::vector<float> v(n);
    Copy(v.data(), p, n * sizeof(float), CopyKind::kDeviceToHost);
    return v;
  }

 private:
  void Copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
    if (!dev_.MemcpyAsync(dst, src, bytes, kind, stream_).ok()) std::abort();
    if (!dev_.RecordEvent(event_, stream_).ok() || !dev_.SynchronizeEvent(event_).ok()) {
      std::abort();
    }
  }
  DeviceApi& dev_;
  StreamHandle stream_;
  EventHandle event_;
};

std::vector<float> Values(int rank, int tensor, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(rank * 1000 + tensor * 100 + i % 97);
  return v;
}

std::unique_ptr<TensorEntry> DeviceEntry(const std::string& name, OpType op, void* in, void* out,
                                         std::vector<int64_t> shape) {
  auto e = std::make_unique<TensorEntry>();
  e->meta.name = name;
  e->meta.op = op;
  e->meta.shape = shape;
  e->meta.device = Device::Cuda(0);
  e->input = {in, DataType::kFloat32, shape, Device::Cuda(0)};
  e->output = {out, DataType::kFloat32, shape, Device::Cuda(0)};
  return e;
}

// One rank's part: every collective once, checked; "" when all match.
std::string RunRank(DataPlane& mesh, int rank, int n) {
  sim::SimDevice dev;
  Host host(dev);
  ops::CpuExecutor cpu(mesh, MakeLogger(rank, "ops", spdlog::level::warn));
  StagedExecutor staged(&dev, &cpu, 10);
  std::string failures;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) failures += "rank " + std::to_string(rank) + ": " + what + "; ";
  };

  // Allreduce: two tensors fused (one out of place, one in place) and one averaged.
  const size_t na = 1021, nb = 10;
  void* a_in = host.Upload(Values(rank, 0, na));
  void* a_out = *dev.Malloc(na * sizeof(float));
  void* b = host.Upload(Values(rank, 1, nb));
  auto ea = DeviceEntry("a", OpType::kAllreduce, a_in, a_out, {static_cast<int64_t>(na)});
  auto eb = DeviceEntry("b", OpType::kAllreduce, b, b, {static_cast<int64_t>(nb)});
  Response sum;
  sum.seq = 1;
  sum.names = {"a", "b"};
  sum.num_elements = {static_cast<int64_t>(na), static_cast<int64_t>(nb)};
  Status s = staged.Execute(sum, {ea.get(), eb.get()}, nullptr);
  expect(s.ok(), "allreduce: " + s.ToString());
  std::vector<float> want_a(na, 0), want_b(nb, 0);
  for (int r = 0; r < n; ++r) {
    std::vector<float> va = Values(r, 0, na), vb = Values(r, 1, nb);
    for (size_t i = 0; i < na; ++i) want_a[i] += va[i];
    for (size_t i = 0; i < nb; ++i) want_b[i] += vb[i];
  }
  expect(host.Download(a_out, na) == want_a, "allreduce 'a' (out of place) differs");
  expect(host.Download(b, nb) == want_b, "allreduce 'b' (in place) differs");
  expect(host.Download(a_in, na) == Values(rank, 0, na), "allreduce changed its input");

  // Broadcast from the last rank, in place.
  const size_t nc = 333;
  void* c = host.Upload(Values(rank, 2, nc));
  auto ec = DeviceEntry("c", OpType::kBroadcast, c, c, {static_cast<int64_t>(nc)});
  Response bcast;
  bcast.seq = 2;
  bcast.op = OpType::kBroadcast;
  bcast.root = n - 1;
  bcast.names = {"c"};
  bcast.num_elements = {static_cast<int64_t>(nc)};
  s = staged.Execute(bcast, {ec.get()}, nullptr);
  expect(s.ok(), "broadcast: " + s.ToString());
  expect(host.Download(c, nc) == Values(n - 1, 2, nc), "broadcast differs");

  // Allgather of rank + 1 rows of 3, into memory the allocator gives on the device.
  const int64_t rows = rank + 1;
  void* g = host.Upload(Values(rank, 3, static_cast<size_t>(rows * 3)));
  auto eg = DeviceEntry("g", OpType::kAllgather, g, nullptr, {rows, 3});
  void* gathered = nullptr;
  int64_t gathered_rows = 0;
  eg->allocate = [&](const std::vector<int64_t>& shape) -> void* {
    gathered_rows = shape[0];
    gathered = *dev.Malloc(static_cast<size_t>(shape[0] * shape[1]) * sizeof(float));
    return gathered;
  };
  Response gather;
  gather.seq = 3;
  gather.op = OpType::kAllgather;
  gather.names = {"g"};
  gather.num_elements = {rows * 3};
  for (int r = 0; r < n; ++r) gather.first_dims.push_back(r + 1);
  s = staged.Execute(gather, {eg.get()}, nullptr);
  expect(s.ok(), "allgather: " + s.ToString());
  std::vector<float> want_g;
  for (int r = 0; r < n; ++r) {
    std::vector<float> part = Values(r, 3, static_cast<size_t>((r + 1) * 3));
    want_g.insert(want_g.end(), part.begin(), part.end());
  }
  expect(gathered_rows == n * (n + 1) / 2, "allgather allocated the wrong shape");
  if (gathered != nullptr) {
    expect(host.Download(gathered, want_g.size()) == want_g, "allgather differs");
    dev.Free(gathered).IgnoreError();
  }
  for (void* p : {a_in, a_out, b, c, g}) dev.Free(p).IgnoreError();
  return failures;
}

}  // namespace

TEST_CASE("GPU tensors staged through the host give the CPU path's results on every rank",
          "[gpu-sim][staged]") {
  const int n = GENERATE(1, 2, 3, 4);
  testing::Watchdog watchdog("staged executor, " + std::to_string(n) + " ranks", 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.ok());
  const std::vector<std::string> results =
      testing::RunOnRanks(n, [&](int rank) { return RunRank(*(*meshes)[rank], rank, n); });
  CHECK(testing::Failures(results).empty());
}

TEST_CASE("A rank's tensors must all be on its one GPU", "[gpu-sim][staged]") {
  sim::SimDevice::Options options;
  options.device_count = 2;
  sim::SimDevice dev(options);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(1);
  REQUIRE(meshes.ok());
  ops::CpuExecutor cpu(*(*meshes)[0], MakeLogger(0, "ops", spdlog::level::warn));
  StagedExecutor staged(&dev, &cpu, 10);
  REQUIRE(dev.SetDevice(0).ok());
  void* on0 = *dev.Malloc(16);
  REQUIRE(dev.SetDevice(1).ok());
  void* on1 = *dev.Malloc(16);
  auto e0 = DeviceEntry("x", OpType::kAllreduce, on0, on0, {4});
  auto e1 = DeviceEntry("y", OpType::kAllreduce, on1, on1, {4});
  e1->input.device = e1->output.device = Device::Cuda(1);
  Response r;
  r.seq = 1;
  r.names = {"x"};
  r.num_elements = {4};
  REQUIRE(staged.Execute(r, {e0.get()}, nullptr).ok());
  r.names = {"y"};
  const Status other = staged.Execute(r, {e1.get()}, nullptr);
  CHECK(other.message() == "a rank uses one GPU: this one staged cuda:0 before, now cuda:1");
  CHECK(dev.Free(on1).ok());
  REQUIRE(dev.SetDevice(0).ok());
  CHECK(dev.Free(on0).ok());
}
}  // namespace kolo::gpu
