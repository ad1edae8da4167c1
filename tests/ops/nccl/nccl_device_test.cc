// NCCL's collectives through NcclCollectiveApi on one real GPU (with CudaDeviceApi for memory
// and streams): one rank, every op of CollectiveApi on small buffers, the results checked on
// the host. Without NCCL in this build, or without a usable GPU, it prints why and exits 77,
// which ctest shows as skipped; on a GPU every case must pass.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "ops/cuda/cuda_backend.h"
#include "ops/half.h"
#include "ops/nccl/nccl_backend.h"

using namespace kolo;
using namespace kolo::gpu;

namespace {

std::unique_ptr<DeviceApi> g_cuda;
std::unique_ptr<CollectiveApi> g_nccl;

// Every wait below (the comm's init, a stream's work) gives up after this.
constexpr auto kDeadline = std::chrono::seconds(60);

void Ok(const Status& status) {
  INFO(status.ToString());
  REQUIRE(status.ok());
}

template <typename T>
T Value(StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(value).value();
}

// One rank's communicator on cuda:0, its stream, an event and the device buffers of a case;
// what was made is freed at scope end, also when a REQUIRE fails half way.
struct Rank {
  CommHandle comm = nullptr;
  StreamHandle stream = nullptr;
  EventHandle event = nullptr;
  std::vector<void*> buffers;

  Rank() = default;
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;
  ~Rank() {
    if (comm != nullptr) {
      const Status destroyed = g_nccl->Destroy(comm);
      if (!destroyed.ok()) std::fprintf(stderr, "Destroy: %s\n", destroyed.ToString().c_str());
    }
    for (void* b : buffers) g_cuda->Free(b).IgnoreError();
    if (event != nullptr) g_cuda->DestroyEvent(event).IgnoreError();
    if (stream != nullptr) g_cuda->DestroyStream(stream).IgnoreError();
  }
};

// NCCL's non-blocking init and CUDA's event query have no wait with a deadline: poll them.
void Pause() {
  std::this_thread::sleep_for(std::chrono::microseconds(200));
}

void Start(Rank& r) {
  Ok(g_cuda->SetDevice(0));
  const UniqueId id = Value(g_nccl->NewUniqueId());
  r.comm = Value(g_nccl->InitComm(1, 0, id, 0));
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (Value(g_nccl->PollComm(r.comm)) != CommState::kReady) {
    if (std::chrono::steady_clock::now() > deadline) FAIL("a one-rank comm not ready in 60 s");
    Pause();
  }
  r.stream = Value(g_cuda->CreateStream(true));
  r.event = Value(g_cuda->CreateEvent(false));
}

// Waits for the work enqueued on the rank's stream so far; fails on a device or comm error.
void Sync(Rank& r) {
  Ok(g_cuda->RecordEvent(r.event, r.stream));
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!Value(g_cuda->QueryEvent(r.event))) {
    REQUIRE(Value(g_nccl->PollComm(r.comm)) == CommState::kReady);
    if (std::chrono::steady_clock::now() > deadline) FAIL("the stream's work took over 60 s");
    Pause();
  }
}

template <typename T>
void* Upload(Rank& r, const std::vector<T>& host) {
  void* device = Value(g_cuda->Malloc(host.size() * sizeof(T)));
  r.buffers.push_back(device);
  Ok(g_cuda->MemcpyAsync(device, host.data(), host.size() * sizeof(T), CopyKind::kHostToDevice,
                         r.stream));
  Sync(r);
  return device;
}

template <typename T>
void* Zeros(Rank& r, size_t count) {
  return Upload(r, std::vector<T>(count));
}

template <typename T>
std::vector<T> Download(Rank& r, const void* device, size_t count) {
  std::vector<T> host(count);
  Ok(g_cuda->MemcpyAsync(host.data(), device, count * sizeof(T), CopyKind::kDeviceToHost,
                         r.stream));
  Sync(r);
  return host;
}

// 7 values, exact in float16 and bfloat16 and after scaling by 0.5, 2 or 3.
std::vector<float> Input() {
  std::vector<float> x;
  for (int i = 0; i < 7; ++i) x.push_back(0.25f * static_cast<float>(i) - 1.0f);
  return x;
}

std::vector<float> Scaled(std::vector<float> x, float factor) {
  for (float& v : x) v *= factor;
  return x;
}

}  // namespace

TEST_CASE("A one-rank allreduce is its input times its prescale, under every op", "[gpu][nccl]") {
  Rank r;
  Start(r);
  const std::vector<float> x = Input();
  void* send = Upload(r, x);
  void* recv = Zeros<float>(r, x.size());
  struct Case {
    ReduceOp op;
    double prescale;
    float factor;  // what one rank's result is of x
  };
  const Case cases[] = {{ReduceOp::kSum, 1, 1},     {ReduceOp::kAverage, 1, 1},
                        {ReduceOp::kMin, 1, 1},     {ReduceOp::kMax, 1, 1},
                        {ReduceOp::kProduct, 1, 1}, {ReduceOp::kSum, 0.5, 0.5f},
                        {ReduceOp::kAverage, 2, 2}};
  for (const Case& c : cases) {
    INFO(ReduceOpName(c.op) << " prescale " << c.prescale);
    Ok(g_nccl->AllReduce(send, recv, x.size(), DataType::kFloat32, c.op, c.prescale, r.comm,
                         r.stream));
    CHECK(Download<float>(r, recv, x.size()) == Scaled(x, c.factor));
  }
  // In place.
  Ok(g_nccl->AllReduce(send, send, x.size(), DataType::kFloat32, ReduceOp::kSum, 3.0, r.comm,
                       r.stream));
  CHECK(Download<float>(r, send, x.size()) == Scaled(x, 3));
}

TEST_CASE("A prescale is applied in the tensor's own type", "[gpu][nccl]") {
  Rank r;
  Start(r);
  const std::vector<float> x = Input();

  std::vector<double> x64(x.begin(), x.end());
  void* d64 = Upload(r, x64);
  Ok(g_nccl->AllReduce(d64, d64, x.size(), DataType::kFloat64, ReduceOp::kSum, 0.25, r.comm,
                       r.stream));
  std::vector<double> expected64;
  for (double v : x64) expected64.push_back(v * 0.25);
  CHECK(Download<double>(r, d64, x.size()) == expected64);

  std::vector<uint16_t> half, bf16;
  for (float v : x) {
    half.push_back(ops::FloatToHalf(v));
    bf16.push_back(ops::FloatToBFloat16(v));
  }
  void* dhalf = Upload(r, half);
  void* dbf16 = Upload(r, bf16);
  Ok(g_nccl->AllReduce(dhalf, dhalf, x.size(), DataType::kFloat16, ReduceOp::kSum, 0.5, r.comm,
                       r.stream));
  Ok(g_nccl->ReduceScatter(dbf16, dbf16, x.size(), DataType::kBFloat16, ReduceOp::kAverage, 2.0,
                           r.comm, r.stream));
  const std::vector<uint16_t> half_out = Download<uint16_t>(r, dhalf, x.size());
  const std::vector<uint16_t> bf16_out = Download<uint16_t>(r, dbf16, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i);
    CHECK(ops::HalfToFloat(half_out[i]) == x[i] * 0.5f);
    CHECK(ops::BFloat16ToFloat(bf16_out[i]) == x[i] * 2.0f);
  }
}

TEST_CASE("One rank's broadcast, allgather and reducescatter are its input", "[gpu][nccl]") {
  Rank r;
  Start(r);
  const std::vector<float> x = Input();
  void* send = Upload(r, x);
  void* recv = Zeros<float>(r, x.size());

  Ok(g_nccl->Broadcast(send, recv, x.size(), DataType::kFloat32, 0, r.comm, r.stream));
  CHECK(Download<float>(r, recv, x.size()) == x);

  void* gathered = Zeros<float>(r, x.size());
  Ok(g_nccl->AllGather(send, gathered, x.size(), DataType::kFloat32, r.comm, r.stream));
  CHECK(Download<float>(r, gathered, x.size()) == x);

  void* scattered = Zeros<float>(r, x.size());
  Ok(g_nccl->ReduceScatter(send, scattered, x.size(), DataType::kFloat32, ReduceOp::kSum, 3.0,
                           r.comm, r.stream));
  CHECK(Download<float>(r, scattered, x.size()) == Scaled(x, 3));

  const std::vector<int64_t> ints = {-3, 0, 1, int64_t{1} << 40};
  void* dints = Upload(r, ints);
  void* dints_out = Zeros<int64_t>(r, ints.size());
  Ok(g_nccl->Broadcast(dints, dints_out, ints.size(), DataType::kInt64, 0, r.comm, r.stream));
  CHECK(Download<int64_t>(r, dints_out, ints.size()) == ints);
}

TEST_CASE("Send and Recv to itself in a group move the buffer", "[gpu][nccl]") {
  Rank r;
  Start(r);
  const std::vector<float> x = Input();
  void* send = Upload(r, x);
  void* recv = Zeros<float>(r, x.size());
  Ok(g_nccl->GroupStart());
  const Status sent = g_nccl->Send(send, x.size(), DataType::kFloat32, 0, r.comm, r.stream);
  const Status received = g_nccl->Recv(recv, x.size(), DataType::kFloat32, 0, r.comm, r.stream);
  Ok(g_nccl->GroupEnd());
  Ok(sent);
  Ok(received);
  CHECK(Download<float>(r, recv, x.size()) == x);
}

TEST_CASE("Destroy flushes the comm's ops and frees it", "[gpu][nccl]") {
  Rank r;
  Start(r);
  const std::vector<float> x = Input();
  void* send = Upload(r, x);
  Ok(g_nccl->AllReduce(send, send, x.size(), DataType::kFloat32, ReduceOp::kSum, 1.0, r.comm,
                       r.stream));
  const CommHandle comm = r.comm;
  r.comm = nullptr;
  Ok(g_nccl->Destroy(comm));
  CHECK(Download<float>(r, send, x.size()) == x);
}

TEST_CASE("An aborted comm fails its later calls and is still destroyed", "[gpu][nccl]") {
  Rank r;
  Start(r);
  const std::vector<float> x = Input();
  void* send = Upload(r, x);
  Ok(g_nccl->Abort(r.comm));
  Ok(g_nccl->Abort(r.comm));  // idempotent

  StatusOr<CommState> state = g_nccl->PollComm(r.comm);
  REQUIRE_FALSE(state.ok());
  CHECK(state.status().message() ==
        "ncclCommAbort (rank 0 of 1 on cuda:0): ncclSystemError (2): the communicator was "
        "aborted");
  const Status after = g_nccl->AllReduce(send, send, x.size(), DataType::kFloat32, ReduceOp::kSum,
                                         1.0, r.comm, r.stream);
  CHECK(after == state.status());

  const CommHandle comm = r.comm;
  r.comm = nullptr;
  Ok(g_nccl->Destroy(comm));
}

int main(int argc, char** argv) {
  StatusOr<std::unique_ptr<CollectiveApi>> nccl = NewNcclCollectiveApi();
  if (!nccl.ok()) {
    std::printf("SKIPPED: no NCCL (%s)\n", nccl.status().message().c_str());
    return 77;
  }
  StatusOr<std::unique_ptr<DeviceApi>> cuda = NewCudaDeviceApi();
  StatusOr<int> count = cuda.ok() ? (*cuda)->DeviceCount() : StatusOr<int>(cuda.status());
  if (!count.ok() || *count == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n",
                count.ok() ? "cudaGetDeviceCount found 0" : count.status().message().c_str());
    return 77;
  }
  g_cuda = std::move(cuda).value();
  g_nccl = std::move(nccl).value();
  const int failed = Catch::Session().run(argc, argv);
  g_nccl.reset();
  g_cuda.reset();
  return failed;
}
