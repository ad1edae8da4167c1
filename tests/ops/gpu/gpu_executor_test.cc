// GpuExecutor against the simulated device and collectives, 1-4 ranks as threads: every op kind
// equals the CPU reference (float32, int32, float16), fused and single, in and out of place;
// Launch returns before the device finished; phases reach the observer; a collective fault
// and a hang fail the op naming the NCCL call or the deadline and abort the comm once;
// Interrupt fails what is queued with the root cause.
#include "ops/gpu/gpu_executor.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/op_validation.h"
#include "tests/support/element_codec.h"
#include "tests/support/sim_gpu/sim_collectives.h"
#include "tests/support/sim_gpu/sim_star_link.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::gpu;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using kolo::testing::LoadElement;
using kolo::testing::StoreElement;

namespace {

constexpr char kRemote[] =
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
std::unique_ptr<TensorEntry> Entry(const std::string& name, OpType op, DataType dtype,
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

Response MakeResponse(OpType op, DataType dtype, const std::vector<TensorEntry*>& entries) {
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
Status Run(GpuExecutor& exec, const Response& response, const std::vector<TensorEntry*>& entries,
           PhaseObserver* observer = nullptr) {
  auto promise = std::make_shared<std::promise<Status>>();
  std::future<Status> done = promise->get_future();
  KOLO_RETURN_IF_ERROR(exec.Launch(response, entries, observer,
                                   [promise](const Status& s) { promise->set_value(s); }));
  if (done.wait_for(20s) != std::future_status::ready) return DeadlineExceeded("done never ran");
  return done.get();
}

// Runs body(rank) for `size` ranks of one comm, each on its own thread; each rank's failure.
std::vector<std::string> RunRanks(
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
std::string Compare(const std::vector<uint8_t>& got, DataType dtype,
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

std::vector<uint8_t> Bytes(DataType dtype, size_t count, const std::function<double(size_t)>& v) {
  std::vector<uint8_t> bytes(count * DataTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) StoreElement(dtype, bytes.data(), i, v(i));
  return bytes;
}

void RequireAllPassed(const std::vector<std::string>& failures) {
  for (size_t r = 0; r < failures.size(); ++r) {
    INFO("rank " << r);
    CHECK(failures[r] == "");
  }
}

}  // namespace

TEST_CASE("Allreduce of one tensor equals the CPU reference, in place and out of place",
          "[gpu-sim][gpu-executor]") {
  const int size = GENERATE(1, 3);
  const DataType dtype = GENERATE(DataType::kFloat32, DataType::kInt32, DataType::kFloat16);
  kolo::testing::Watchdog watchdog("single allreduce", 120s);
  RequireAllPassed(RunRanks(size, [dtype](ExecRank& rank) -> std::string {
    for (ReduceOp op : kolo::testing::kAllOps) {
      for (bool in_place : {true, false}) {
        const int64_t count = 1021;
        const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
        void* in = rank.Upload(kolo::testing::MakeInput(dtype, count, rank.rank(), op));
        void* out = in_place ? in : rank.Alloc(bytes);
        auto e = Entry("t", OpType::kAllreduce, dtype, {count}, in, out);
        Response response = MakeResponse(OpType::kAllreduce, dtype, {e.get()});
        response.reduce_op = op;
        const Status s = Run(rank.exec(), response, {e.get()});
        if (!s.ok()) return s.ToString();
        const std::string bad =
            kolo::testing::CheckAllreduce(rank.Download(out, bytes), dtype, count, rank.size(), op);
        if (!bad.empty()) return bad + (in_place ? " (in place)" : " (out of place)");
        if (!in_place &&
            rank.Download(in, bytes) != kolo::testing::MakeInput(dtype, count, rank.rank(), op)) {
          return "the input changed";
        }
      }
    }
    return "";
  }));
}

TEST_CASE("Fused allreduce goes through the fusion buffer, or a buffer of its own past it",
          "[gpu-sim][gpu-executor]") {
  const size_t fusion_bytes = GENERATE(size_t{1} << 20, size_t{64});
  kolo::testing::Watchdog watchdog("fused allreduce", 120s);
  RequireAllPassed(RunRanks(
      3,
      [](ExecRank& rank) -> std::string {
        for (DataType dtype : {DataType::kFloat32, DataType::kInt32, DataType::kFloat16}) {
          for (ReduceOp op : kolo::testing::kAllOps) {
            const std::vector<int64_t> counts = {7, 0, 300, 1};
            std::vector<std::unique_ptr<TensorEntry>> owned;
            std::vector<TensorEntry*> entries;
            std::vector<void*> outs;
            for (size_t t = 0; t < counts.size(); ++t) {
              void* in = rank.Upload(kolo::testing::MakeInput(dtype, counts[t], rank.rank(), op));
              // Odd tensors out of place.
              void* out = t % 2 == 1 ? rank.Alloc(counts[t] * DataTypeSize(dtype)) : in;
              owned.push_back(
                  Entry("f" + std::to_string(t), OpType::kAllreduce, dtype, {counts[t]}, in, out));
              entries.push_back(owned.back().get());
              outs.push_back(out);
            }
            Response response = MakeResponse(OpType::kAllreduce, dtype, entries);
            response.reduce_op = op;
            PhaseLog phases;
            const Status s = Run(rank.exec(), response, entries, &phases);
            if (!s.ok()) return s.ToString();
            for (size_t t = 0; t < counts.size(); ++t) {
              const std::string bad = kolo::testing::CheckAllreduce(
                  rank.Download(outs[t], counts[t] * DataTypeSize(dtype)), dtype, counts[t],
                  rank.size(), op);
              if (!bad.empty()) return "tensor " + std::to_string(t) + ": " + bad;
            }
            const std::vector<std::string> want = {"MEMCPY_IN_FUSION_BUFFER", "NCCL_ALLREDUCE",
                                                   "MEMCPY_OUT_FUSION_BUFFER"};
            if (phases.names() != want) return "phases differ";
          }
        }
        return "";
      },
      [fusion_bytes](int) {
        RankOptions options;
        options.fusion_bytes = fusion_bytes;
        return options;
      }));
}

TEST_CASE("Scale factors fold into one prescale for sums and averages; others are refused",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("scaled allreduce", 60s);
  RequireAllPassed(RunRanks(2, [](ExecRank& rank) -> std::string {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        for (size_t tensors : {1, 2}) {
          const int64_t count = 100;
          std::vector<std::unique_ptr<TensorEntry>> owned;
          std::vector<TensorEntry*> entries;
          for (size_t t = 0; t < tensors; ++t) {
            void* in = rank.Upload(kolo::testing::MakeInput(dtype, count, rank.rank(), op));
            owned.push_back(Entry("s" + std::to_string(t), OpType::kAllreduce, dtype, {count}, in));
            entries.push_back(owned.back().get());
          }
          Response response = MakeResponse(OpType::kAllreduce, dtype, entries);
          response.reduce_op = op;
          response.prescale = 0.5;
          response.postscale = 4.0;
          const Status s = Run(rank.exec(), response, entries);
          if (!s.ok()) return s.ToString();
          for (const TensorEntry* e : entries) {
            const std::string bad = Compare(
                rank.Download(e->output.data, count * DataTypeSize(dtype)), dtype,
                [&](size_t i) {
                  return 2.0 * kolo::testing::ExpectedAllreduce(rank.size(),
                                                                static_cast<int64_t>(i), op, dtype);
                },
                DataTypeName(dtype) + " " + ReduceOpName(op));
            if (!bad.empty()) return bad;
          }
        }
      }
    }
    return "";
  }));
  // Refused before anything is enqueued: NCCL has no scaled min, and no integer scaling.
  RequireAllPassed(RunRanks(1, [](ExecRank& rank) -> std::string {
    void* in = rank.Alloc(16);
    auto f = Entry("m", OpType::kAllreduce, DataType::kFloat32, {4}, in);
    Response min = MakeResponse(OpType::kAllreduce, DataType::kFloat32, {f.get()});
    min.reduce_op = ReduceOp::kMin;
    min.postscale = 2.0;
    const Status refused = rank.exec().Launch(min, {f.get()}, nullptr, [](const Status&) {});
    if (refused.code() != StatusCode::kInvalidArgument ||
        refused.message() !=
            "allreduce 'm': scale factors other than 1 with min are not supported on GPU "
            "tensors: NCCL scales only sums and averages (ncclRedOpCreatePreMulSum)") {
      return refused.ToString();
    }
    auto i = Entry("i", OpType::kAllreduce, DataType::kInt32, {4}, in);
    Response scaled = MakeResponse(OpType::kAllreduce, DataType::kInt32, {i.get()});
    scaled.prescale = 0.5;
    const Status integer = rank.exec().Launch(scaled, {i.get()}, nullptr, [](const Status&) {});
    if (integer.message() !=
        "allreduce 'i': scale factors other than 1 need a floating-point dtype, not int32") {
      return integer.ToString();
    }
    return rank.exec().pending() == 0 ? "" : "a refused op is pending";
  }));
}

TEST_CASE("Broadcast copies the root's tensor to every rank", "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("broadcast", 60s);
  RequireAllPassed(RunRanks(3, [](ExecRank& rank) -> std::string {
    const DataType dtype = DataType::kInt32;
    const size_t count = 257;
    const auto value = [](int r) { return [r](size_t i) { return 1000.0 * r + i; }; };
    void* in = rank.Upload(Bytes(dtype, count, value(rank.rank())));
    void* out = rank.rank() == 2 ? rank.Alloc(count * 4) : in;  // out of place on one rank
    auto e = Entry("b", OpType::kBroadcast, dtype, {static_cast<int64_t>(count)}, in, out);
    Response response = MakeResponse(OpType::kBroadcast, dtype, {e.get()});
    response.root = 1;
    PhaseLog phases;
    const Status s = Run(rank.exec(), response, {e.get()}, &phases);
    if (!s.ok()) return s.ToString();
    if (phases.names() != std::vector<std::string>{"NCCL_BROADCAST"}) return "phases differ";
    return Compare(rank.Download(out, count * 4), dtype, value(1), "broadcast");
  }));
}

TEST_CASE("Allgather concatenates each rank's rows, equal or not, single or fused",
          "[gpu-sim][gpu-executor]") {
  const bool equal_rows = GENERATE(true, false);
  const size_t tensors = GENERATE(size_t{1}, size_t{2});
  kolo::testing::Watchdog watchdog("allgather", 60s);
  RequireAllPassed(RunRanks(3, [=](ExecRank& rank) -> std::string {
    const int n = rank.size();
    const DataType dtype = DataType::kFloat32;
    const int64_t cols = 3;
    // Rows of tensor t on rank r (rank 1 sends none of tensor 0 when they differ).
    const auto rows = [&](size_t t, int r) -> int64_t {
      return equal_rows ? 2 : static_cast<int64_t>((r + t) % 3);
    };
    const auto value = [](size_t t, int r, size_t i) { return 10000.0 * t + 100.0 * r + i; };
    std::vector<std::unique_ptr<TensorEntry>> owned;
    std::vector<TensorEntry*> entries;
    std::vector<std::vector<void*>> allocated(tensors);
    Response response;
    response.op = OpType::kAllgather;
    response.dtype = dtype;
    for (size_t t = 0; t < tensors; ++t) {
      const int64_t mine = rows(t, rank.rank());
      void* in = rank.Upload(Bytes(dtype, static_cast<size_t>(mine * cols),
                                   [&](size_t i) { return value(t, rank.rank(), i); }));
      owned.push_back(Entry("g" + std::to_string(t), OpType::kAllgather, dtype, {mine, cols}, in));
      TensorEntry* e = owned.back().get();
      e->output = TensorView{};
      e->allocate = [&rank, &allocated, t](const std::vector<int64_t>& shape) -> void* {
        int64_t elements = 1;
        for (int64_t d : shape) elements *= d;
        allocated[t].push_back(rank.Alloc(static_cast<size_t>(elements) * 4));
        return allocated[t].back();
      };
      entries.push_back(e);
      response.names.push_back(e->meta.name);
    }
    for (size_t t = 0; t < tensors; ++t) {
      for (int r = 0; r < n; ++r) response.first_dims.push_back(rows(t, r));
    }
    const Status s = Run(rank.exec(), response, entries);
    if (!s.ok()) return s.ToString();
    for (size_t t = 0; t < tensors; ++t) {
      const TensorEntry& e = *entries[t];
      int64_t total = 0;
      std::vector<double> want;
      for (int r = 0; r < n; ++r) {
        total += rows(t, r);
        for (int64_t i = 0; i < rows(t, r) * cols; ++i) {
          want.push_back(value(t, r, static_cast<size_t>(i)));
        }
      }
      if (allocated[t].size() != 1 || e.output.data != allocated[t][0] ||
          e.output.shape != std::vector<int64_t>{total, cols}) {
        return "tensor " + std::to_string(t) + ": the output is not the allocated " +
               ShapeToString({total, cols});
      }
      const std::string bad = Compare(
          rank.Download(e.output.data, want.size() * 4), dtype, [&](size_t i) { return want[i]; },
          "allgather tensor " + std::to_string(t));
      if (!bad.empty()) return bad;
    }
    return "";
  }));
}

TEST_CASE("Reducescatter leaves each rank its part of the reduction, single or fused",
          "[gpu-sim][gpu-executor]") {
  // 8 rows over 4 ranks split evenly (one tensor runs without a copy); 10 rows do not.
  const int64_t rows = GENERATE(int64_t{8}, int64_t{10});
  const size_t tensors = GENERATE(size_t{1}, size_t{2});
  kolo::testing::Watchdog watchdog("reducescatter", 60s);
  RequireAllPassed(RunRanks(4, [=](ExecRank& rank) -> std::string {
    for (DataType dtype : {DataType::kFloat32, DataType::kInt32}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
        const int64_t cols = 5;
        const std::vector<int64_t> split = SplitRows(rows, rank.size());
        int64_t first_row = 0;
        for (int r = 0; r < rank.rank(); ++r) first_row += split[r];
        std::vector<std::unique_ptr<TensorEntry>> owned;
        std::vector<TensorEntry*> entries;
        Response response;
        response.op = OpType::kReducescatter;
        response.dtype = dtype;
        response.reduce_op = op;
        for (size_t t = 0; t < tensors; ++t) {
          void* in = rank.Upload(kolo::testing::MakeInput(dtype, rows * cols, rank.rank(), op));
          void* out =
              rank.Alloc(static_cast<size_t>(split[rank.rank()] * cols) * DataTypeSize(dtype));
          owned.push_back(
              Entry("r" + std::to_string(t), OpType::kReducescatter, dtype, {rows, cols}, in));
          owned.back()->output = {out, dtype, {split[rank.rank()], cols}, Device::Cuda(0)};
          entries.push_back(owned.back().get());
          response.names.push_back(owned.back()->meta.name);
          response.num_elements.push_back(rows * cols);
        }
        const Status s = Run(rank.exec(), response, entries);
        if (!s.ok()) return s.ToString();
        for (const TensorEntry* e : entries) {
          const std::string bad = Compare(
              rank.Download(e->output.data, e->output.num_bytes()), dtype,
              [&](size_t i) {
                return kolo::testing::ExpectedAllreduce(
                    rank.size(), first_row * cols + static_cast<int64_t>(i), op, dtype);
              },
              DataTypeName(dtype) + " " + ReduceOpName(op) + " '" + e->meta.name + "'");
          if (!bad.empty()) return bad;
        }
      }
    }
    return "";
  }));
}

TEST_CASE("Alltoall sends each peer its rows through one grouped send/recv",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("alltoall", 60s);
  RequireAllPassed(RunRanks(3, [](ExecRank& rank) -> std::string {
    const int n = rank.size();
    const int me = rank.rank();
    const DataType dtype = DataType::kInt32;
    const int64_t cols = 2;
    // Rows rank s sends to rank d; rank 0 sends rank 2 nothing.
    const auto rows = [](int s, int d) -> int64_t { return s == 0 && d == 2 ? 0 : s + d + 1; };
    const auto value = [](int s, int d, int64_t i) { return 10000.0 * s + 100.0 * d + i; };
    Response response;
    response.op = OpType::kAlltoall;
    response.dtype = dtype;
    response.names = {"a"};
    for (int s = 0; s < n; ++s) {
      for (int d = 0; d < n; ++d) response.splits.push_back(rows(s, d));
    }
    std::vector<double> input;
    int64_t in_rows = 0;
    for (int d = 0; d < n; ++d) {
      in_rows += rows(me, d);
      for (int64_t i = 0; i < rows(me, d) * cols; ++i) input.push_back(value(me, d, i));
    }
    void* in = rank.Upload(Bytes(dtype, input.size(), [&](size_t i) { return input[i]; }));
    auto e = Entry("a", OpType::kAlltoall, dtype, {in_rows, cols}, in);
    e->output = TensorView{};
    void* out = nullptr;
    e->allocate = [&](const std::vector<int64_t>& shape) {
      out = rank.Alloc(static_cast<size_t>(shape[0] * shape[1]) * 4);
      return out;
    };
    std::vector<int64_t> received;
    e->received_splits = &received;
    const Status s = Run(rank.exec(), response, {e.get()});
    if (!s.ok()) return s.ToString();
    std::vector<double> want;
    std::vector<int64_t> want_splits;
    for (int from = 0; from < n; ++from) {
      want_splits.push_back(rows(from, me));
      for (int64_t i = 0; i < rows(from, me) * cols; ++i) want.push_back(value(from, me, i));
    }
    if (received != want_splits) return "received splits differ";
    if (e->output.data != out) return "the output is not the allocated one";
    return Compare(
        rank.Download(out, want.size() * 4), dtype, [&](size_t i) { return want[i]; }, "alltoall");
  }));
}

TEST_CASE("A joined rank's stand-in contributes device zeros", "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("stand-in", 60s);
  RequireAllPassed(RunRanks(
      2,
      [](ExecRank& rank) -> std::string {
        const int64_t count = 64;
        const DataType dtype = DataType::kFloat32;
        const auto value = [](size_t i) { return 3.0 * i; };
        std::vector<uint8_t> host_zeros(count * 4, 0);
        std::unique_ptr<TensorEntry> e;
        if (rank.rank() == 0) {
          e = Entry("j", OpType::kAllreduce, dtype, {count},
                    rank.Upload(Bytes(dtype, count, value)));
        } else {  // as BackgroundLoop::StandIn makes it
          e = Entry("j", OpType::kAllreduce, dtype, {count}, host_zeros.data());
          e->input.device = e->output.device = Device::Cpu();
        }
        const Response response = MakeResponse(OpType::kAllreduce, dtype, {e.get()});
        const Status s = Run(rank.exec(), response, {e.get()});
        if (!s.ok()) return s.ToString();
        if (rank.rank() == 1) {
          return host_zeros == std::vector<uint8_t>(count * 4, 0) ? "" : "the stand-in changed";
        }
        return Compare(rank.Download(e->output.data, count * 4), dtype, value, "with zeros");
      },
      [](int) {
        RankOptions options;
        options.stand_in_device = 0;
        return options;
      }));
}

TEST_CASE("Launch returns before the device finished; done runs after, in order",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("asynchronous launch", 60s);
  RequireAllPassed(RunRanks(
      2,
      [](ExecRank& rank) -> std::string {
        const int64_t count = 32;
        const DataType dtype = DataType::kFloat32;
        std::vector<std::unique_ptr<TensorEntry>> owned;
        std::mutex mu;
        std::vector<std::string> order;
        std::vector<std::promise<Status>> done(3);
        const auto main_thread = std::this_thread::get_id();
        bool on_main = false;
        for (size_t k = 0; k < 3; ++k) {
          void* in =
              rank.Upload(kolo::testing::MakeInput(dtype, count, rank.rank(), ReduceOp::kSum));
          owned.push_back(Entry("x" + std::to_string(k), OpType::kAllreduce, dtype, {count}, in));
        }
        for (size_t k = 0; k < 3; ++k) {
          TensorEntry* e = owned[k].get();
          const Status launched =
              rank.exec().Launch(MakeResponse(OpType::kAllreduce, dtype, {e}), {e}, nullptr,
                                 [&, k, e](const Status& s) {
                                   std::lock_guard<std::mutex> lock(mu);
                                   order.push_back(e->meta.name);
                                   on_main = on_main || std::this_thread::get_id() == main_thread;
                                   done[k].set_value(s);
                                 });
          if (!launched.ok()) return launched.ToString();
        }
        {
          // Each stream operation takes 50 ms: nothing can have completed yet.
          std::lock_guard<std::mutex> lock(mu);
          if (!order.empty()) return "done ran before the device finished";
        }
        if (rank.exec().pending() != 3) return "not 3 ops pending";
        for (auto& d : done) {
          std::future<Status> f = d.get_future();
          if (f.wait_for(20s) != std::future_status::ready) return "done never ran";
          if (Status s = f.get(); !s.ok()) return s.ToString();
        }
        if (on_main) return "done ran on the launching thread";
        if (order != std::vector<std::string>{"x0", "x1", "x2"}) return "out of order";
        for (const auto& e : owned) {
          const std::string bad = kolo::testing::CheckAllreduce(
              rank.Download(e->output.data, count * 4), dtype, count, rank.size(), ReduceOp::kSum);
          if (!bad.empty()) return bad;
        }
        return "";
      },
      [](int) {
        RankOptions options;
        options.device.op_delay = 50ms;
        return options;
      }));
}

TEST_CASE("A ready event orders kolo's stream after the producer's", "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("ready event", 60s);
  EventHandle ready = nullptr;
  RequireAllPassed(RunRanks(
      1,
      [&ready](ExecRank& rank) -> std::string {
        // The producer: a slow stream of the user's writing the input after a while.
        StreamHandle user = *rank.dev().CreateStream(false);
        ready = *rank.dev().CreateEvent(false);
        const int64_t count = 16;
        const std::vector<uint8_t> values =
            Bytes(DataType::kFloat32, count, [](size_t i) { return i + 1.0; });
        void* in = rank.Alloc(count * 4);
        REQUIRE(rank.dev()
                    .Enqueue(user,
                             [] {
                               std::this_thread::sleep_for(100ms);
                               return Status::Ok();
                             })
                    .ok());
        REQUIRE(rank.dev()
                    .MemcpyAsync(in, values.data(), count * 4, CopyKind::kHostToDevice, user)
                    .ok());
        REQUIRE(rank.dev().RecordEvent(ready, user).ok());
        auto e = Entry("r", OpType::kAllreduce, DataType::kFloat32, {count}, in);
        const Status s =
            Run(rank.exec(), MakeResponse(OpType::kAllreduce, DataType::kFloat32, {e.get()}),
                {e.get()});
        std::string result = s.ok() ? "" : s.ToString();
        if (result.empty()) {
          result = Compare(
              rank.Download(in, count * 4), DataType::kFloat32, [](size_t i) { return i + 1.0; },
              "after the ready event");
        }
        rank.dev().DestroyStream(user).IgnoreError();
        rank.dev().DestroyEvent(ready).IgnoreError();
        return result;
      },
      [&ready](int) {
        RankOptions options;
        options.ready_event = [&ready](const TensorEntry&) { return ready; };
        return options;
      }));
}

TEST_CASE(
    "A collective fault fails the op on every rank naming the call and the rank, and "
    "aborts each comm once",
    "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("collective fault", 60s);
  const auto results = RunRanks(
      2,
      [](ExecRank& rank) -> std::string {
        const int64_t count = 100;
        const DataType dtype = DataType::kFloat32;
        std::vector<std::unique_ptr<TensorEntry>> owned;
        for (int k = 0; k < 2; ++k) {
          void* in =
              rank.Upload(kolo::testing::MakeInput(dtype, count, rank.rank(), ReduceOp::kSum));
          owned.push_back(Entry("w" + std::to_string(k), OpType::kAllreduce, dtype, {count}, in));
        }
        TensorEntry* first = owned[0].get();
        TensorEntry* second = owned[1].get();
        const Status ok =
            Run(rank.exec(), MakeResponse(OpType::kAllreduce, dtype, {first}), {first});
        if (!ok.ok()) return "first op: " + ok.ToString();
        const Status failed =
            Run(rank.exec(), MakeResponse(OpType::kAllreduce, dtype, {second}), {second});
        if (rank.aborts() != 1) return "aborted " + std::to_string(rank.aborts()) + " times";
        rank.exec().Interrupt(Aborted("the job aborted"));  // the loop's verdict: no 2nd abort
        if (rank.aborts() != 1) return "Interrupt aborted again";
        return failed.message();
      },
      [](int r) {
        RankOptions options;
        if (r == 1) options.coll.fault = sim::SimCollectives::Fault::kAsyncError;
        options.coll.fault_after_ops = 1;
        return options;
      });
  CHECK(results[1] ==
        std::string("allreduce 'w1': ") + kRemote + "simulated async error on rank 1 after 1 ops");
  CHECK(results[0] == std::string("allreduce 'w1': ") + kRemote +
                          "rank 1 failed: simulated async error on rank 1 after 1 ops");
}

TEST_CASE("An op hung past KOLO_TIMEOUT_SECONDS fails at the deadline and the abort frees its peer",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("hang", 60s);
  ManualClock clock;  // rank 1's: the test moves it past the deadline
  const auto results = RunRanks(
      2,
      [&](ExecRank& rank) -> std::string {
        const int64_t count = 8;
        void* in = rank.Upload(
            kolo::testing::MakeInput(DataType::kFloat32, count, rank.rank(), ReduceOp::kSum));
        auto e = Entry("h", OpType::kAllreduce, DataType::kFloat32, {count}, in);
        auto promise = std::make_shared<std::promise<Status>>();
        std::future<Status> done = promise->get_future();
        const Status launched = rank.exec().Launch(
            MakeResponse(OpType::kAllreduce, DataType::kFloat32, {e.get()}), {e.get()}, nullptr,
            [promise](const Status& s) { promise->set_value(s); });
        if (!launched.ok()) return launched.ToString();
        if (rank.rank() == 1) {
          if (done.wait_for(200ms) != std::future_status::timeout)
            return "done before the deadline";
          const auto start = std::chrono::steady_clock::now();
          clock.Advance(std::chrono::seconds(5));
          if (done.wait_for(5s) != std::future_status::ready) return "no failure at the deadline";
          if (std::chrono::steady_clock::now() - start > 2s) return "slow to fail";
        } else if (done.wait_for(20s) != std::future_status::ready) {
          return "the peer was not freed";
        }
        if (rank.aborts() != 1) return "aborted " + std::to_string(rank.aborts()) + " times";
        return done.get().message();
      },
      [&clock](int r) {
        RankOptions options;
        if (r == 1) {
          options.coll.fault = sim::SimCollectives::Fault::kHang;
          options.clock = &clock;
          options.timeout_seconds = 5;
        }
        return options;
      });
  CHECK(results[1] ==
        "allreduce 'h': the device did not finish it within 5 s (KOLO_TIMEOUT_SECONDS)");
  CHECK_THAT(results[0], Contains("allreduce 'h': ") && Contains(kRemote) &&
                             Contains("rank 1 closed its connection"));
}

TEST_CASE("Interrupt fails the queued ops with the root cause and aborts the comm once",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("interrupt", 60s);
  const UniqueId id = sim::NewSimId();
  ExecRank rank0(2, 0, id);
  ExecRank rank1(2, 1, id);  // never runs its part: rank 0's ops wait for it
  std::vector<std::unique_ptr<TensorEntry>> owned;
  std::vector<std::promise<Status>> done(3);
  for (size_t k = 0; k < 3; ++k) {
    owned.push_back(Entry("q" + std::to_string(k), OpType::kAllreduce, DataType::kFloat32, {4},
                          rank0.Alloc(16)));
    TensorEntry* e = owned.back().get();
    REQUIRE(rank0.exec()
                .Launch(MakeResponse(OpType::kAllreduce, DataType::kFloat32, {e}), {e}, nullptr,
                        [&done, k](const Status& s) { done[k].set_value(s); })
                .ok());
  }
  std::this_thread::sleep_for(100ms);
  CHECK(rank0.exec().pending() == 3);
  const Status why = Aborted("rank 1: lost its controller connection");
  rank0.exec().Interrupt(why);
  rank0.exec().Interrupt(Aborted("a later cause"));  // the first one wins
  for (auto& d : done) {
    std::future<Status> f = d.get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    CHECK(f.get() == why);
  }
  CHECK(rank0.aborts() == 1);
  CHECK(rank1.aborts() == 0);
}

TEST_CASE("Join and barrier complete in order after the ops before them, or at once",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("join", 60s);
  RequireAllPassed(RunRanks(
      2,
      [](ExecRank& rank) -> std::string {
        // Like the loop's join entry: no tensor, host memory.
        auto join = std::make_unique<TensorEntry>();
        join->meta.name = "join";
        join->meta.op = OpType::kJoin;
        Response response = MakeResponse(OpType::kJoin, DataType::kFloat32, {join.get()});
        // First thing on a fresh executor: no device chosen yet, nothing to wait for.
        if (Status s = Run(rank.exec(), response, {join.get()}); !s.ok()) return s.ToString();
        void* in = rank.Upload(
            kolo::testing::MakeInput(DataType::kFloat32, 64, rank.rank(), ReduceOp::kSum));
        auto e = Entry("y", OpType::kAllreduce, DataType::kFloat32, {64}, in);
        std::mutex mu;
        std::vector<std::string> order;
        auto record = [&](const std::string& name) {
          return [&, name](const Status& s) {
            std::lock_guard<std::mutex> lock(mu);
            order.push_back(name + (s.ok() ? "" : ": " + s.ToString()));
          };
        };
        Status launched =
            rank.exec().Launch(MakeResponse(OpType::kAllreduce, DataType::kFloat32, {e.get()}),
                               {e.get()}, nullptr, record("allreduce"));
        if (!launched.ok()) return launched.ToString();
        response.op = OpType::kBarrier;
        if (Status s = Run(rank.exec(), response, {join.get()}); !s.ok()) return s.ToString();
        std::lock_guard<std::mutex> lock(mu);
        return order == std::vector<std::string>{"allreduce"} ? "" : "the barrier overtook";
      },
      [](int) {
        RankOptions options;
        options.device.op_delay = 20ms;
        return options;
      }));
}
