// SimCollectives fails as NCCL does, within bounds: non-blocking init and its deadline, what is
// refused at enqueue, mismatched ops, an async error, a hang that only Abort releases, a rank
// that disappears (a thread, and a killed process), and ranks in separate processes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "ops/gpu/collective_error.h"
#include "tests/ops/gpu/sim_rank.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::gpu;
using namespace kolo::gpu::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;

namespace {

constexpr char kRemote[] =
    "ncclAllReduce: ncclRemoteError (6): remote process exited or there was a network error; "
    "last error: ";

// One float32 sum allreduce of `count` elements; the error, or "" when the result is right.
std::string AllReduceOnce(SimRank& rank, size_t count = 1021) {
  const auto in = kolo::testing::MakeInput(DataType::kFloat32, static_cast<int64_t>(count),
                                           rank.rank(), ReduceOp::kSum);
  void* buf = rank.Upload(in);
  if (buf == nullptr) return "no memory";
  Status s = rank.coll().AllReduce(buf, buf, count, DataType::kFloat32, ReduceOp::kSum, 1.0,
                                   rank.comm(), rank.stream());
  if (!s.ok()) return s.message();
  StatusOr<std::vector<uint8_t>> out = rank.Download(buf, count * sizeof(float));
  if (!out.ok()) return out.status().message();
  const std::string bad = kolo::testing::CheckAllreduce(
      *out, DataType::kFloat32, static_cast<int64_t>(count), rank.size(), ReduceOp::kSum);
  return bad.empty() ? "" : "wrong result: " + bad;
}

long long MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Waits for `child` until `limit`; kills it past that. Its exit code, or -1.
int WaitChild(pid_t child, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(5ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("NCCL errors read as NCCL prints them, with a code saying what the caller can do",
          "[gpu-sim][collectives]") {
  const Status no_driver = CollectiveError(
      "ncclCommInitRank", kNcclUnhandledCudaError,
      "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
      "Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'");
  CHECK(no_driver.code() == StatusCode::kInternal);
  CHECK(no_driver.message() ==
        "ncclCommInitRank: ncclUnhandledCudaError (1): unhandled cuda error (run with "
        "NCCL_DEBUG=INFO for details); last error: Cuda failure 'CUDA driver version is "
        "insufficient for CUDA runtime version'");
  CHECK(CollectiveError("ncclSend", kNcclRemoteError, "x", "").message() ==
        "ncclSend: ncclRemoteError (6): x");
  CHECK(CollectiveError("ncclSend", kNcclRemoteError, "x", "").code() == StatusCode::kAborted);
  CHECK(CollectiveError("c", kNcclInvalidUsage, "x", "").code() == StatusCode::kInvalidArgument);
  CHECK(CollectiveError("c", kNcclSystemError, "x", "").code() == StatusCode::kUnavailable);
  CHECK(NcclResultName(42) == "ncclResult(42)");
}

TEST_CASE("InitComm returns at once and PollComm says in progress until every rank joined",
          "[gpu-sim][collectives]") {
  kolo::testing::Watchdog watchdog("non-blocking init", 30s);
  const UniqueId id = sim::NewSimId();
  SimRank first(2, 0, id);
  REQUIRE(first.init().ok());
  for (int i = 0; i < 20; ++i) {  // rank 1 has not started: waiting is not an error
    StatusOr<CommState> state = first.coll().PollComm(first.comm());
    REQUIRE(state.ok());
    CHECK(*state == CommState::kInProgress);
    std::this_thread::sleep_for(5ms);
  }
  SimRank second(2, 1, id);
  CHECK(first.WaitReady(10s).ok());
  CHECK(second.WaitReady(10s).ok());
  // Both ranks from one host thread: the collectives only enqueue.
  const auto in0 = kolo::testing::MakeInput(DataType::kInt32, 5, 0, ReduceOp::kMax);
  const auto in1 = kolo::testing::MakeInput(DataType::kInt32, 5, 1, ReduceOp::kMax);
  void* b0 = first.Upload(in0);
  void* b1 = second.Upload(in1);
  REQUIRE(
      first.coll()
          .AllReduce(b0, b0, 5, DataType::kInt32, ReduceOp::kMax, 1.0, first.comm(), first.stream())
          .ok());
  REQUIRE(second.coll()
              .AllReduce(b1, b1, 5, DataType::kInt32, ReduceOp::kMax, 1.0, second.comm(),
                         second.stream())
              .ok());
  StatusOr<std::vector<uint8_t>> out = second.Download(b1, 5 * sizeof(int32_t));
  REQUIRE(out.ok());
  CHECK(kolo::testing::CheckAllreduce(*out, DataType::kInt32, 5, 2, ReduceOp::kMax) == "");
}

TEST_CASE("An injected init delay keeps the comm in progress that long", "[gpu-sim][collectives]") {
  kolo::testing::Watchdog watchdog("init delay", 30s);
  SimOptions options;
  options.init_delay = 300ms;
  const UniqueId id = sim::NewSimId();
  const auto start = Clock::now();
  SimRank a(2, 0, id, options), b(2, 1, id, options);
  std::this_thread::sleep_for(100ms);
  StatusOr<CommState> state = a.coll().PollComm(a.comm());
  REQUIRE(state.ok());
  CHECK(*state == CommState::kInProgress);
  CHECK(a.WaitReady(10s).ok());
  CHECK(b.WaitReady(10s).ok());
  CHECK(MsSince(start) >= 300);
}

TEST_CASE("A rank that never joins fails the init at its deadline, naming the rank",
          "[gpu-sim][collectives]") {
  kolo::testing::Watchdog watchdog("init deadline", 30s);
  SimOptions options;
  options.init_timeout = 300ms;
  const UniqueId id = sim::NewSimId();
  const auto start = Clock::now();
  SimRank a(3, 0, id, options), b(3, 1, id, options);  // rank 2 never comes
  const Status late = a.WaitReady(10s);
  CHECK(late.code() == StatusCode::kUnavailable);
  CHECK(late.message() ==
        "ncclCommInitRank: ncclSystemError (2): unhandled system error (run with NCCL_DEBUG=INFO "
        "for details); last error: rank(s) 2 of 3 did not join in time");
  CHECK_THAT(b.WaitReady(10s).message(), Contains("rank 0 did not see every rank join in time"));
  CHECK(MsSince(start) < 3000);
}

TEST_CASE("What NCCL refuses at enqueue fails at once with its message", "[gpu-sim][collectives]") {
  kolo::testing::Watchdog watchdog("enqueue refusals", 30s);
  SimRank alone(1, 0, sim::NewSimId());
  REQUIRE(alone.WaitReady(10s).ok());
  void* f = alone.Alloc(64);
  CollectiveApi& coll = alone.coll();
  const Status int_scale =
      coll.AllReduce(f, f, 4, DataType::kInt32, ReduceOp::kSum, 0.5, alone.comm(), alone.stream());
  CHECK(int_scale.code() == StatusCode::kInvalidArgument);
  CHECK(int_scale.message() ==
        "ncclAllReduce: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for "
        "details); last error: a prescale of 0.500000 needs a floating type and sum or average, "
        "not int32 sum");
  CHECK_THAT(
      coll.AllReduce(f, f, 4, DataType::kFloat32, ReduceOp::kMin, 2.0, alone.comm(), alone.stream())
          .message(),
      Contains("not float32 min"));
  std::vector<float> host(16);
  CHECK_THAT(coll.AllReduce(host.data(), f, 4, DataType::kFloat32, ReduceOp::kSum, 1.0,
                            alone.comm(), alone.stream())
                 .message(),
             Contains("is not device memory of cuda:0"));
  CHECK_THAT(coll.AllReduce(f, f, 17, DataType::kFloat32, ReduceOp::kSum, 1.0, alone.comm(),
                            alone.stream())
                 .message(),
             Contains("(68 bytes) is not device memory"));  // past a 64-byte allocation
  CHECK_THAT(coll.Broadcast(f, f, 4, DataType::kFloat32, 1, alone.comm(), alone.stream()).message(),
             Contains("root 1 is not a rank"));
  CHECK_THAT(coll.Send(f, 4, DataType::kFloat32, 1, alone.comm(), alone.stream()).message(),
             Contains("peer 1 is not a rank"));
  CHECK(coll.GroupEnd().code() == StatusCode::kInvalidArgument);
  // A comm still joining refuses ops (NCCL: poll until ready first).
  SimRank waiting(2, 0, sim::NewSimId());
  void* g = waiting.Alloc(16);
  CHECK_THAT(waiting.coll()
                 .AllReduce(g, g, 4, DataType::kFloat32, ReduceOp::kSum, 1.0, waiting.comm(),
                            waiting.stream())
                 .message(),
             Contains("ncclInvalidUsage (5)"));
}

TEST_CASE("Ranks that disagree on an op fail it on every rank with ncclInvalidUsage",
          "[gpu-sim][collectives]") {
  kolo::testing::Watchdog watchdog("mismatch", 30s);
  const auto failures = RunRanks(
      2, [](SimRank& rank) { return AllReduceOnce(rank, 10 + static_cast<size_t>(rank.rank())); });
  for (const std::string& failure : failures) {
    CHECK_THAT(failure, Contains("ncclAllReduce: ncclInvalidUsage (5)") &&
                            Contains("ranks disagree: rank 0 runs ncclAllReduce #0 of 10 float32"));
  }
}

TEST_CASE("An async error on one rank fails that op on every rank and sticks to the comm",
          "[gpu-sim][collectives]") {
  kolo::testing::Watchdog watchdog("async error", 30s);
  const auto results = RunRanks(
      2,
      [](SimRank& rank) -> std::string {
        const std::string first = AllReduceOnce(rank);
        if (!first.empty()) return "first op: " + first;
        const std::string second = AllReduceOnce(rank);
        StatusOr<CommState> polled = rank.coll().PollComm(rank.comm());
        if (polled.ok() || polled.status().message() != second) return "PollComm disagrees";
        void* buf = rank.Alloc(16);  // the next op is refused at once: the comm failed
        const std::string third = rank.coll()
                                      .AllReduce(buf, buf, 4, DataType::kFloat32, ReduceOp::kSum,
                                                 1.0, rank.comm(), rank.stream())
                                      .message();
        return third == second ? second : "third op: " + third;
      },
      [](int r) {
        SimOptions options;
        if (r == 1) options.fault = sim::SimCollectives::Fault::kAsyncError;
        options.fault_after_ops = 1;
        return options;
      });
  CHECK(results[1] == std::string(kRemote) + "simulated async error on rank 1 after 1 ops");
  CHECK(results[0] ==
        std::string(kRemote) + "rank 1 failed: simulated async error on rank 1 after 1 ops");
}

TEST_CASE("A hung op blocks until Abort, which releases it and its peer within a bound",
          "[gpu-sim][collectives]") {
  kolo::testing::Watchdog watchdog("hang and abort", 30s);
  SimOptions hang;
  hang.fault = sim::SimCollectives::Fault::kHang;
  const UniqueId id = sim::NewSimId();
  SimRank a(2, 0, id), b(2, 1, id, hang);
  REQUIRE((a.WaitReady(10s).ok() && b.WaitReady(10s).ok()));
  void* fa = a.Alloc(64);
  void* fb = b.Alloc(64);
  REQUIRE(a.coll()
              .AllReduce(fa, fa, 16, DataType::kFloat32, ReduceOp::kSum, 1.0, a.comm(), a.stream())
              .ok());
  REQUIRE(b.coll()
              .AllReduce(fb, fb, 16, DataType::kFloat32, ReduceOp::kSum, 1.0, b.comm(), b.stream())
              .ok());
  CHECK(a.Finish(300ms).message() == "still running");
  CHECK(b.Finish(1ms).message() == "still running");
  const auto start = Clock::now();
  REQUIRE(b.coll().Abort(b.comm()).ok());
  REQUIRE(b.coll().Abort(b.comm()).ok());  // idempotent
  CHECK(b.Finish(5s).message() ==
        "ncclAllReduce: ncclSystemError (2): unhandled system error (run with NCCL_DEBUG=INFO for "
        "details); last error: simulated hang on rank 1 after 0 ops: released by ncclCommAbort");
  CHECK(a.Finish(5s).message() == std::string(kRemote) + "rank 1 closed its connection");
  CHECK(MsSince(start) < 2000);
  CHECK_THAT(b.coll().PollComm(b.comm()).status().message(), Contains("was aborted"));
}

TEST_CASE("Abort releases an op waiting for a rank that never runs it", "[gpu-sim][collectives]") {
  kolo::testing::Watchdog watchdog("abort a waiting op", 30s);
  const UniqueId id = sim::NewSimId();
  SimRank a(2, 0, id), b(2, 1, id);
  REQUIRE((a.WaitReady(10s).ok() && b.WaitReady(10s).ok()));
  void* fa = a.Alloc(64);
  REQUIRE(a.coll()
              .AllReduce(fa, fa, 16, DataType::kFloat32, ReduceOp::kSum, 1.0, a.comm(), a.stream())
              .ok());
  CHECK(a.Finish(200ms).message() == "still running");
  const auto start = Clock::now();
  REQUIRE(a.coll().Abort(a.comm()).ok());
  CHECK_THAT(a.Finish(5s).message(), Contains("communicator aborted while waiting for rank 1"));
  CHECK(MsSince(start) < 2000);
  // The peer's next op fails too: rank 0 left.
  CHECK_THAT(AllReduceOnce(b), Contains("rank 0 closed its connection"));
}

TEST_CASE("A rank that disappears fails its peers' op with an error naming it",
          "[gpu-sim][collectives]") {
  const int gone = GENERATE(0, 2);
  kolo::testing::Watchdog watchdog("vanishing rank " + std::to_string(gone), 30s);
  const auto results = RunRanks(
      3,
      [](SimRank& rank) -> std::string {
        const std::string first = AllReduceOnce(rank);
        return first.empty() ? AllReduceOnce(rank) : "first op: " + first;
      },
      [gone](int r) {
        SimOptions options;
        if (r == gone) options.fault = sim::SimCollectives::Fault::kVanish;
        options.fault_after_ops = 1;
        return options;
      });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    if (r == gone) {
      CHECK(results[static_cast<size_t>(r)] ==
            std::string(kRemote) + "simulated peer loss on rank " + std::to_string(gone) +
                " after 1 ops: this rank left the communicator");
    } else {
      CHECK_THAT(
          results[static_cast<size_t>(r)],
          Contains(kRemote) && Contains("rank " + std::to_string(gone) + " closed its connection"));
    }
  }
}

TEST_CASE("Ranks in separate processes meet through the id; a killed one is named",
          "[gpu-sim][collectives]") {
  const bool kill_rank1 = GENERATE(false, true);
  const UniqueId id = sim::NewSimId();
  pid_t children[2];
  for (int r = 0; r < 2; ++r) {  // forked before this process starts any thread
    children[r] = fork();
    REQUIRE(children[r] >= 0);
    if (children[r] == 0) {
      SimRank rank(2, r, id);
      if (!rank.WaitReady(10s).ok()) _exit(2);
      if (kill_rank1 && r == 1) raise(SIGKILL);
      const std::string result = AllReduceOnce(rank);
      if (!kill_rank1) _exit(result.empty() ? 0 : 3);
      _exit(result.find("rank 1 closed its connection") != std::string::npos ? 0 : 4);
    }
  }
  kolo::testing::Watchdog watchdog("allreduce across processes", 60s);
  CHECK(WaitChild(children[0], 30s) == 0);
  const int second = WaitChild(children[1], 30s);
  CHECK(second == (kill_rank1 ? -1 : 0));
}
