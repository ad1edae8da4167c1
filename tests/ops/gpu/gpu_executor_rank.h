// Test support of GpuExecutor's tests (tests/ops/gpu/gpu_executor_*_test.cc): a simulated GPU
// rank with a GpuExecutor over it (ExecRank), ranks run as threads of one comm (RunRanks), the
// tensor entries and responses they launch, and element comparisons against the CPU reference.
// Threading: an ExecRank is used by one thread; RunRanks starts one thread per rank.
#pragma once

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ops/gpu/gpu_executor.h"
#include "tests/support/element_codec.h"
#include "tests/support/sim_gpu/sim_collectives.h"
#include "tests/support/sim_gpu/sim_star_link.h"

namespace kolo::gpu::executor_test {

using namespace std::chrono_literals;
using kolo::testing::LoadElement;
using kolo::testing::StoreElement;

inline constexpr char kRemote[] =
    "ncclAllReduce: ncclRemoteError (6): remote process exited or there was a network error; "
    "last error: ";

// SimCollectives that counts Abort calls (the "exactly once" of the executor's contract).
class CountingCollectives final : public CollectiveApi {
 public:
  explicit CountingCollectives(CollectiveApi* inner) : inner_(inner) {}
  std::atomic<int> aborts{0};

  std::string name() const override { return inner_->name(); }
  StatusOr<int> Version() override { return inner_->Version(); }
  StatusOr<UniqueId> NewUniqueId() override { return inner_->NewUniqueId(); }
  StatusOr<CommHandle> InitComm(int size, int rank, const UniqueId& id, int device) override {
    return inner_->InitComm(size, rank, id, device);
  }
  StatusOr<CommState> PollComm(CommHandle comm) override { return inner_->PollComm(comm); }
  Status AllReduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                   double prescale, CommHandle comm, StreamHandle stream) override {
    return inner_->AllReduce(send, recv, count, dtype, op, prescale, comm, stream);
  }
  Status Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                   CommHandle comm, StreamHandle stream) override {
    return inner_->Broadcast(send, recv, count, dtype, root, comm, stream);
  }
  Status AllGather(const void* send, void* recv, size_t count, DataType dtype, CommHandle comm,
                   StreamHandle stream) override {
    return inner_->AllGather(send, recv, count, dtype, comm, stream);
  }
  Status ReduceScatter(const void* send, void* recv, size_t recv_count, DataType dtype, ReduceOp op,
                       double prescale, CommHandle comm, StreamHandle stream) override {
    return inner_->ReduceScatter(send, recv, recv_count, dtype, op, prescale, comm, stream);
  }
  Status GroupStart() override { return inner_->GroupStart(); }
  Status GroupEnd() override { return inner_->GroupEnd(); }
  Status Send(const void* send, size_t count, DataType dtype, int peer, CommHandle comm,
              StreamHandle stream) override {
    return inner_->Send(send, count, dtype, peer, comm, stream);
  }
  Status Recv(void* recv, size_t count, DataType dtype, int peer, CommHandle comm,
              StreamHandle stream) override {
    return inner_->Recv(recv, count, dtype, peer, comm, stream);
  }
  Status Abort(CommHandle comm) override {
    ++aborts;
    return inner_->Abort(comm);
  }
  Status Destroy(CommHandle comm) override { return inner_->Destroy(comm); }

 private:
  CollectiveApi* const inner_;
};

struct RankOptions {
  sim::SimDevice::Options device;
  sim::SimCollectives::Options coll;
  size_t fusion_bytes = 1 << 20;
  double timeout_seconds = 30;
  const Clock* clock = SteadyClock::Get();
  int stand_in_device = -1;
  GpuExecutor::ReadyEvent ready_event;
};

// Records phases as the completion thread reports them.
class PhaseLog final : public PhaseObserver {
 public:
  void OnPhase(const char* name, Clock::TimePoint start, Clock::TimePoint end) override {
    std::lock_guard<std::mutex> lock(mu_);
    names_.emplace_back(name);
    if (end < start) names_.emplace_back("(ends before it starts)");
  }
  std::vector<std::string> names() {
    std::lock_guard<std::mutex> lock(mu_);
    return names_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> names_;
};

// One simulated GPU rank with a GpuExecutor over it. Used by one thread.
class ExecRank {
 public:
  ExecRank(int size, int rank, const UniqueId& id, const RankOptions& options = {})
      : size_(size), rank_(rank), dev_(options.device), sim_(&dev_, options.coll), coll_(&sim_) {
    stream_ = *dev_.CreateStream(false);
    event_ = *dev_.CreateEvent(false);
    StatusOr<CommHandle> comm = coll_.InitComm(size, rank, id, 0);
    if (comm.ok()) comm_ = *comm;
    GpuExecutor::Config config;
    config.rank = rank;
    config.size = size;
    config.device = options.stand_in_device;
    config.fusion_threshold_bytes = options.fusion_bytes;
    config.completion.timeout_seconds = options.timeout_seconds;
    config.completion.clock = options.clock;
    config.ready_event = options.ready_event;
    exec_ = std::make_unique<GpuExecutor>(
        &dev_, &coll_, [this](int) { return Ready(); }, config,
        MakeLogger(rank, "gpu", spdlog::level::off));
  }
  ~ExecRank() {
    exec_.reset();
    if (comm_ != nullptr) coll_.Destroy(comm_).IgnoreError();  // tests check what they need
    dev_.DestroyStream(stream_).IgnoreError();
    dev_.DestroyEvent(event_).IgnoreError();
    for (void* p : buffers_) dev_.Free(p).IgnoreError();
  }

  int size() const { return size_; }
  int rank() const { return rank_; }
  GpuExecutor& exec() { return *exec_; }
  sim::SimDevice& dev() { return dev_; }
  int aborts() const { return coll_.aborts; }

  // A device copy of `bytes` (at least one byte allocated), complete when this returns.
  void* Upload(const std::vector<uint8_t>& bytes) {
    void* p = *dev_.Malloc(bytes.empty() ? 1 : bytes.size());
    buffers_.push_back(p);
    if (!bytes.empty()) {
      REQUIRE(
          dev_.MemcpyAsync(p, bytes.data(), bytes.size(), CopyKind::kHostToDevice, stream_).ok());
    }
    REQUIRE(Sync().ok());
    return p;
  }
  void* Alloc(size_t bytes) { return Upload(std::vector<uint8_t>(bytes, 0xEE)); }
  std::vector<uint8_t> Download(const void* ptr, size_t bytes) {
    std::vector<uint8_t> host(bytes);
    if (bytes > 0) {
      REQUIRE(dev_.MemcpyAsync(host.data(), ptr, bytes, CopyKind::kDeviceToHost, stream_).ok());
    }
    REQUIRE(Sync().ok());
    return host;
  }

 private:
  StatusOr<CommHandle> Ready() {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      StatusOr<CommState> state = coll_.PollComm(comm_);
      if (!state.ok()) return state.status();
      if (*state == CommState::kReady) return comm_;
      if (std::chrono::steady_clock::now() > deadline) return DeadlineExceeded("comm not ready");
      std::this_thread::sleep_for(200us);
    }
  }
  Status Sync() {
    KOLO_RETURN_IF_ERROR(dev_.RecordEvent(event_, stream_));
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (;;) {
      StatusOr<bool> done = dev_.QueryEvent(event_);
      if (!done.ok()) return done.status();
      if (*done) return Status::Ok();
      if (std::chrono::steady_clock::now() > deadline) return DeadlineExceeded("still running");
      std::this_thread::sleep_for(100us);
    }
  }

  const int size_;
  const int rank_;
  sim::SimDevice dev_;
  sim::SimCollectives sim_;
  CountingCollectives coll_;
  StreamHandle stream_ = nullptr;
  EventHandle event_ = nullptr;
  CommHandle comm_ = nullptr;
  std::vector<void*> buffers_;
  std::unique_ptr<GpuExecutor> exec_;
};

// A device tensor entry of `shape` over `input` (and `output`, or in place when null).
inline std::unique_ptr<TensorEntry> Entry(const std::string& name, OpType op, DataType dtype,
                                          std::vector<int64_t> shape, void* input,
                                          void* output = nullptr) {
  auto e = std::make_unique<TensorEntry>();
  e->meta.name = name;
  e->meta.op = op;
  e->meta.dtype = dtype;
  e->meta.shape = shape;
  e->meta.device = Device::Cuda(0);
  e->input = {input, dtype, shape, Device::Cuda(0)};
  e->output = {output != nullptr ? output : input, dtype, shape, Device::Cuda(0)};
  return e;
}

inline Response MakeResponse(OpType op, DataType dtype, const std::vector<TensorEntry*>& entries) {
  Response r;
  r.op = op;
  r.dtype = dtype;
  for (const TensorEntry* e : entries) {
    r.names.push_back(e->meta.name);
    r.num_elements.push_back(e->input.num_elements());
  }
  return r;
}

// Launches and waits (to a deadline) for `done`; the Launch error, or done's status.
inline Status Run(GpuExecutor& exec, const Response& response,
                  const std::vector<TensorEntry*>& entries, PhaseObserver* observer = nullptr) {
  auto promise = std::make_shared<std::promise<Status>>();
  std::future<Status> done = promise->get_future();
  KOLO_RETURN_IF_ERROR(exec.Launch(response, entries, observer,
                                   [promise](const Status& s) { promise->set_value(s); }));
  if (done.wait_for(20s) != std::future_status::ready) return DeadlineExceeded("done never ran");
  return done.get();
}

// Runs body(rank) for `size` ranks of one comm, each on its own thread; each rank's failure.
inline std::vector<std::string> RunRanks(
    int size, const std::function<std::string(ExecRank&)>& body,
    const std::function<RankOptions(int)>& options = [](int) { return RankOptions{}; }) {
  const UniqueId id = sim::NewSimId();
  std::vector<std::string> failures(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ExecRank rank(size, r, id, options(r));
      failures[static_cast<size_t>(r)] = body(rank);
    });
  }
  for (std::thread& t : threads) t.join();
  return failures;
}

// "" if every element of `got` is `want(i)` within the dtype's tolerance.
inline std::string Compare(const std::vector<uint8_t>& got, DataType dtype,
                           const std::function<double(size_t)>& want, const std::string& what) {
  const double tolerance = dtype == DataType::kFloat16 ? 1e-3 : 1e-6;
  const size_t count = got.size() / DataTypeSize(dtype);
  for (size_t i = 0; i < count; ++i) {
    const double g = LoadElement(dtype, got.data(), i);
    const double w = want(i);
    if (std::fabs(g - w) > tolerance * std::max(1.0, std::fabs(w))) {
      return what + ": element " + std::to_string(i) + " is " + std::to_string(g) + ", expected " +
             std::to_string(w);
    }
  }
  return "";
}

inline std::vector<uint8_t> Bytes(DataType dtype, size_t count,
                                  const std::function<double(size_t)>& v) {
  std::vector<uint8_t> bytes(count * DataTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) StoreElement(dtype, bytes.data(), i, v(i));
  return bytes;
}

inline void RequireAllPassed(const std::vector<std::string>& failures) {
  for (size_t r = 0; r < failures.size(); ++r) {
    INFO("rank " << r);
    CHECK(failures[r] == "");
  }
}

}  // namespace kolo::gpu::executor_test
