// Op-local errors through the public API: mismatches reach every rank with one message and
// the job goes on; local argument errors fail at enqueue; shutdown ends what is pending.
#include <atomic>
#include <catch2/catch.hpp>
#include <future>

#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

// Every rank's status, then an allreduce that must still work afterwards.
std::string ExpectSameErrorThenRecover(Runtime& rt, const Status& s,
                                       const std::vector<std::string>& needles) {
  if (s.ok()) return "expected an error, got OK";
  if (s.code() != StatusCode::kMismatch) return "wrong code: " + s.ToString();
  for (const std::string& needle : needles) {
    if (s.message().find(needle) == std::string::npos) {
      return "message '" + s.message() + "' lacks '" + needle + "'";
    }
  }
  float after[3] = {1, 1, 1};
  TensorView view{after, DataType::kFloat32, {3}, Device::Cpu()};
  Status next = rt.Allreduce("after-error", view, view);
  if (!next.ok()) return "job did not go on: " + next.ToString();
  if (after[0] != static_cast<float>(rt.size())) return "wrong result after the error";
  return "";
}

}  // namespace

TEST_CASE("Mismatched shapes fail on every rank with one message naming both",
          "[runtime][errors]") {
  Watchdog watchdog("shape mismatch", std::chrono::seconds(60));
  LocalJob job(3);
  std::vector<std::string> messages(3);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    float data[6] = {0};
    std::vector<int64_t> shape =
        rt.rank() == 2 ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{2, 3};
    TensorView view{data, DataType::kFloat32, shape, Device::Cpu()};
    Status s = rt.Allreduce("grad/w1", view, view);
    messages[rt.rank()] = s.message();
    return ExpectSameErrorThenRecover(rt, s, {"'grad/w1'", "[2, 3]", "[3, 2]", "rank 2"});
  });
  CHECK(failures == std::vector<std::string>{});
  CHECK(messages[0] == messages[1]);
  CHECK(messages[1] == messages[2]);
}

TEST_CASE("Mismatched dtypes and reduce ops fail on every rank and the job goes on",
          "[runtime][errors]") {
  Watchdog watchdog("dtype mismatch", std::chrono::seconds(60));
  LocalJob job(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    double d[4] = {0};
    TensorView view{d, rt.rank() == 0 ? DataType::kFloat64 : DataType::kInt64, {4}, Device::Cpu()};
    Status s = rt.Allreduce("mixed", view, view);
    std::string e = ExpectSameErrorThenRecover(rt, s, {"'mixed'", "float64", "int64"});
    if (!e.empty()) return e;
    float f[2] = {1, 2};
    TensorView fview{f, DataType::kFloat32, {2}, Device::Cpu()};
    AllreduceOptions options;
    options.op = rt.rank() == 0 ? ReduceOp::kSum : ReduceOp::kMax;
    s = rt.Allreduce("ops", fview, fview, options);
    return ExpectSameErrorThenRecover(rt, s, {"'ops'", "sum", "max"});
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("A second op with a name in flight fails at enqueue; the first completes",
          "[runtime][errors]") {
  Watchdog watchdog("duplicate name", std::chrono::seconds(60));
  LocalJob job(2);
  float a[4] = {1, 1, 1, 1}, b[4] = {1, 1, 1, 1};
  TensorView va{a, DataType::kFloat32, {4}, Device::Cpu()};
  TensorView vb{b, DataType::kFloat32, {4}, Device::Cpu()};
  std::promise<Status> first;
  REQUIRE(job.rank(0)
              .AllreduceAsync("dup", va, va, {}, [&](const Status& s) { first.set_value(s); })
              .ok());
  std::atomic<int> second_callbacks{0};
  Status second =
      job.rank(0).AllreduceAsync("dup", vb, vb, {}, [&](const Status&) { ++second_callbacks; });
  CHECK(second.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(second.message(), Catch::Contains("'dup'") && Catch::Contains("in flight"));
  float c[4] = {1, 1, 1, 1};
  TensorView vc{c, DataType::kFloat32, {4}, Device::Cpu()};
  REQUIRE(job.rank(1).Allreduce("dup", vc, vc).ok());
  CHECK(first.get_future().get().ok());
  CHECK(a[0] == 2.0f);
  CHECK(second_callbacks == 0);
}

TEST_CASE("Callbacks may enqueue the next op", "[runtime][callbacks]") {
  Watchdog watchdog("callback chain", std::chrono::seconds(60));
  LocalJob job(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    constexpr int kChain = 20;
    std::vector<float> x(8, 1.0f);
    TensorView view{x.data(), DataType::kFloat32, {8}, Device::Cpu()};
    std::promise<Status> done;
    std::function<void(int, const Status&)> step = [&](int i, const Status& s) {
      if (!s.ok() || i == kChain) {
        done.set_value(s);
        return;
      }
      Status enq =
          rt.AllreduceAsync("chain", view, view, {}, [&, i](const Status& st) { step(i + 1, st); });
      if (!enq.ok()) done.set_value(enq);
    };
    step(0, Status::Ok());
    Status s = done.get_future().get();
    if (!s.ok()) return s.ToString();
    if (x[0] != 1048576.0f) return "expected 2^20, got " + std::to_string(x[0]);
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Shutdown fails what a peer never submitted and refuses later enqueues",
          "[runtime][shutdown]") {
  Watchdog watchdog("shutdown with pending op", std::chrono::seconds(60));
  LocalJob job(2);
  float x[2] = {1, 1};
  TensorView view{x, DataType::kFloat32, {2}, Device::Cpu()};
  std::promise<Status> lonely;
  std::atomic<int> calls{0};
  REQUIRE(job.rank(0)
              .AllreduceAsync("lonely", view, view, {},
                              [&](const Status& s) {
                                if (++calls == 1) lonely.set_value(s);
                              })
              .ok());
  auto start = std::chrono::steady_clock::now();
  std::vector<Status> statuses = job.ShutdownAll();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 5.0);
  for (const Status& s : statuses) CHECK(s.ok());
  Status pending = lonely.get_future().get();
  CHECK(pending.code() == StatusCode::kShutdown);
  CHECK_THAT(pending.message(), Catch::Contains("rank 1 called shutdown() before submitting "
                                                "'lonely'"));
  CHECK(calls == 1);
}

TEST_CASE("Ops every rank submitted before shutdown() still complete", "[runtime][shutdown]") {
  Watchdog watchdog("shutdown right after async ops", std::chrono::seconds(60));
  for (int round = 0; round < 10; ++round) {
    LocalJob job(3);
    std::vector<std::vector<float>> data(3, std::vector<float>(64, 1.0f));
    std::vector<std::promise<Status>> done(3);
    for (int r = 0; r < 3; ++r) {
      TensorView view{data[r].data(), DataType::kFloat32, {64}, Device::Cpu()};
      REQUIRE(job.rank(r)
                  .AllreduceAsync("last", view, view, {},
                                  [&done, r](const Status& s) { done[r].set_value(s); })
                  .ok());
    }
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
    for (int r = 0; r < 3; ++r) {
      Status s = done[r].get_future().get();
      INFO("round " << round << ", rank " << r << ": " << s.ToString());
      CHECK(s.ok());
      CHECK(data[r][63] == 3.0f);
    }
  }
}

TEST_CASE("Blocking calls from a callback fail instead of deadlocking", "[runtime][callbacks]") {
  Watchdog watchdog("blocking calls in callbacks", std::chrono::seconds(30));
  LocalJob job(1);
  float x[2] = {1, 2};
  TensorView view{x, DataType::kFloat32, {2}, Device::Cpu()};
  std::promise<std::pair<Status, Status>> seen;
  Runtime& rt = job.rank(0);
  REQUIRE(rt.AllreduceAsync("outer", view, view, {}, [&](const Status&) {
              float y[1] = {1};
              TensorView inner{y, DataType::kFloat32, {1}, Device::Cpu()};
              seen.set_value({rt.Allreduce("inner", inner, inner), rt.Shutdown()});
            }).ok());
  auto [blocking, shut] = seen.get_future().get();
  CHECK(blocking.code() == StatusCode::kFailedPrecondition);
  // The op's name is built for this error only (runtime.cc): it still names op and tensor.
  CHECK_THAT(blocking.message(),
             Catch::StartsWith("allreduce 'inner': the blocking form was called from a kolo "
                               "callback"));
  CHECK(shut.code() == StatusCode::kFailedPrecondition);
  // The runtime is unharmed.
  CHECK(rt.Allreduce("after", view, view).ok());
}

TEST_CASE("Local argument errors fail at enqueue with no callback", "[runtime][errors]") {
  Watchdog watchdog("local argument errors", std::chrono::seconds(30));
  LocalJob job(1);
  uint8_t flags[3] = {1, 0, 1};
  TensorView view{flags, DataType::kBool, {3}, Device::Cpu()};
  AllreduceOptions scaled;
  scaled.postscale = 0.5;
  bool called = false;
  Status s = job.rank(0).AllreduceAsync("flags", view, view, scaled,
                                        [&](const Status&) { called = true; });
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("'flags'"));
  CHECK_FALSE(called);
  // The runtime keeps serving.
  CHECK(job.rank(0).Allreduce("flags", view, view).ok());
  CHECK(flags[2] == 1);
}

TEST_CASE("A rank that never submits is reported and, if configured, ends the job",
          "[runtime][stall]") {
  Watchdog watchdog("stall shutdown", std::chrono::seconds(30));
  LocalJob job(2, [](Options& o) {
    o.stall_check_seconds = 0.2;
    o.stall_shutdown_seconds = 0.5;
  });
  float x[4] = {1, 1, 1, 1};
  TensorView view{x, DataType::kFloat32, {4}, Device::Cpu()};
  const auto start = std::chrono::steady_clock::now();
  Status s = job.rank(0).Allreduce("only-rank-0", view, view);  // rank 1 never submits it
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(s.code() == StatusCode::kAborted);
  CHECK_THAT(s.message(), Catch::Contains("KOLO_STALL_SHUTDOWN_SECONDS") &&
                              Catch::Contains("rank 1 never submitted 'only-rank-0'"));
  CHECK(seconds >= 0.5);
  CHECK(seconds < 5.0);
  // Rank 1, which submitted nothing, learns of the abort too.
  Status later = job.rank(1).Allreduce("after", view, view);
  CHECK(later.code() == StatusCode::kAborted);
  CHECK_THAT(later.message(), Catch::Contains("only-rank-0"));
}

TEST_CASE("AbortJob ends the job on every rank, naming who had not submitted the pending op",
          "[runtime][abort]") {
  // torch.distributed's backend calls it when a wait() gave up: no rank may then run the op
  // (rank 1 submits it only after the abort) or any later one.
  Watchdog watchdog("abort_job", std::chrono::seconds(30));
  LocalJob job(2);
  float x[4] = {1, 1, 1, 1};
  TensorView view{x, DataType::kFloat32, {4}, Device::Cpu()};
  StatusOr<Handle> pending = job.rank(0).AllreduceAsync("late", view, view);
  REQUIRE(pending.ok());
  CHECK(job.rank(0).AbortJob("").code() == StatusCode::kInvalidArgument);
  // A barrier after it: once it completes, the controller has rank 0's announcement (its
  // requests travel in order), as it has after a wait() that timed out.
  auto other = std::async(std::launch::async, [&] { return job.rank(1).Barrier(); });
  REQUIRE(job.rank(0).Barrier().ok());
  REQUIRE(other.get().ok());
  REQUIRE(job.rank(0).AbortJob("its wait timed out").ok());
  const Status failed = pending->Synchronize(10.0);
  CHECK(failed.code() == StatusCode::kAborted);
  CHECK_THAT(failed.message(),
             Catch::Contains("rank 0: its wait timed out; at the abort, rank 1 has not "
                             "submitted 'late'"));
  float y[4] = {2, 2, 2, 2};
  TensorView late{y, DataType::kFloat32, {4}, Device::Cpu()};
  const Status on_rank_1 = job.rank(1).Allreduce("late", late, late);
  CHECK(on_rank_1.code() == StatusCode::kAborted);
  CHECK_THAT(on_rank_1.message(), Catch::Contains("its wait timed out"));
  CHECK(x[0] == 1.0f);  // never reduced
  CHECK(y[0] == 2.0f);
  CHECK(job.rank(0).AbortJob("again").ok());  // the job is over: nothing more to do
}
