// Handles (kolo/handle.h): the async forms without a callback return one; poll() and
// synchronize() over 1-4 ranks with exact results, a timeout, waits from several threads,
// refusal in a callback, and handles never waited. (handle_alloc_test.cc: no allocation
// beyond the op's own.)
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

TensorView Floats(std::vector<float>& v) {
  return {v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::Cpu()};
}

}  // namespace

TEST_CASE("Handles of every kind of async op give exact results over 1-4 ranks",
          "[runtime][handle]") {
  const int size = GENERATE(1, 2, 3, 4);
  Watchdog watchdog("handles", std::chrono::seconds(90));
  LocalJob job(size);
  auto failures = job.RunOnAllRanks([](Runtime& rt) -> std::string {
    const int rank = rt.rank();
    const int n = rt.size();
    std::vector<float> a(5, static_cast<float>(rank + 1)), b(3, 2.0f), c(2, 1.0f);
    std::vector<float> mine = {static_cast<float>(rank), static_cast<float>(rank)};
    std::vector<float> gathered;
    std::vector<float> whole = {1, 2, 3, 4};
    std::vector<float> part(static_cast<size_t>(ReducescatterShape({4}, rank, n)[0]));
    std::vector<float> root(4, static_cast<float>(rank));
    Allocator allocate = [&](const std::vector<int64_t>& shape) -> void* {
      gathered.resize(static_cast<size_t>(shape[0]));
      return gathered.data();
    };
    std::vector<Handle> handles;
    auto keep = [&](StatusOr<Handle> h) -> Status {
      if (!h.ok()) return h.status();
      handles.push_back(*h);
      return Status::Ok();
    };
    const std::vector<Status> queued = {
        keep(rt.AllreduceAsync("h/a", Floats(a), Floats(a))),
        keep(rt.GroupedAllreduceAsync({"h/b", "h/c"}, {Floats(b), Floats(c)},
                                      {Floats(b), Floats(c)})),
        keep(rt.AllgatherAsync("h/g", Floats(mine), allocate)),
        keep(rt.ReducescatterAsync("h/r", Floats(whole), Floats(part))),
        keep(rt.BroadcastAsync("h/bc", Floats(root), n - 1)),
        keep(rt.BarrierAsync()),
        keep(allreduce_async("not/initialized", Floats(a), Floats(a))),
    };
    for (size_t i = 0; i + 1 < queued.size(); ++i) {
      if (!queued[i].ok()) return "enqueue: " + queued[i].ToString();
    }
    if (queued.back().ok()) return "an op without a default runtime was queued";
    for (const Handle& h : handles) {
      Status s = synchronize(h);
      if (!s.ok()) return s.ToString();
      if (!poll(h)) return "poll() is false after synchronize()";
      if (!synchronize(h, 0).ok()) return "a second synchronize() differs";
    }
    if (a[0] != n * (n + 1) / 2.0f || b[2] != 2.0f * n || c[1] != 1.0f * n) return "wrong sums";
    if (gathered.size() != static_cast<size_t>(2 * n)) return "wrong allgather size";
    for (int i = 0; i < 2 * n; ++i) {
      if (gathered[i] != i / 2) return "wrong allgather data";
    }
    int64_t first = 0;
    for (int r = 0; r < rank; ++r) first += ReducescatterShape({4}, r, n)[0];
    for (size_t k = 0; k < part.size(); ++k) {
      if (part[k] != n * whole[first + k]) return "wrong reducescatter data";
    }
    for (float v : root) {
      if (v != n - 1) return "wrong broadcast";
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("poll() is false and synchronize(timeout) times out until every rank submitted",
          "[runtime][handle]") {
  Watchdog watchdog("handle timeout", std::chrono::seconds(60));
  LocalJob job(2);
  std::vector<float> x0(4, 1.0f), x1(4, 2.0f);
  StatusOr<Handle> h = job.rank(0).AllreduceAsync("late", Floats(x0), Floats(x0));
  REQUIRE(h.ok());
  CHECK_FALSE(poll(*h));
  Status early = synchronize(*h, 0.05);
  CHECK(early.code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(early.message(), Catch::Contains("still running"));
  // Several threads wait for the same op; rank 1 submits it meanwhile.
  std::vector<std::future<Status>> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(std::async(std::launch::async, [copy = *h] { return synchronize(copy); }));
  }
  REQUIRE(job.rank(1).Allreduce("late", Floats(x1), Floats(x1)).ok());
  for (auto& w : waiters) CHECK(w.get().ok());
  CHECK(poll(*h));
  CHECK(x0 == std::vector<float>(4, 3.0f));
  Handle none;
  CHECK(poll(none));
  CHECK(synchronize(none).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("A handle's failure is the op's; waiting in a callback is refused; unwaited handles go",
          "[runtime][handle]") {
  Watchdog watchdog("handle errors", std::chrono::seconds(60));
  LocalJob job(2);
  auto failures = job.RunOnAllRanks([](Runtime& rt) -> std::string {
    // Ranks disagree on the shape: the op fails with kMismatch, which synchronize() returns.
    std::vector<float> v(static_cast<size_t>(rt.rank() + 1), 1.0f);
    StatusOr<Handle> bad = rt.AllreduceAsync("shapes", Floats(v), Floats(v));
    if (!bad.ok()) return bad.status().ToString();
    Status s = synchronize(*bad);
    if (s.code() != StatusCode::kMismatch) return "expected a mismatch, got " + s.ToString();
    // Waiting inside a callback fails at once; poll() there is fine.
    std::vector<float> w(4, 1.0f);
    StatusOr<Handle> first = rt.AllreduceAsync("first", Floats(w), Floats(w));
    if (!first.ok()) return first.status().ToString();
    std::promise<std::string> inside;
    std::vector<float> u(4, 1.0f);
    s = rt.AllreduceAsync("second", Floats(u), Floats(u), {}, [&, h = *first](const Status&) {
      poll(h);
      Status waited = synchronize(h);
      inside.set_value(waited.code() == StatusCode::kFailedPrecondition
                           ? ""
                           : "synchronize() in a callback gave " + waited.ToString());
    });
    if (!s.ok()) return s.ToString();
    std::string in_callback = inside.get_future().get();
    if (!in_callback.empty()) return in_callback;
    // Handles dropped before their ops complete: the ops still run, nothing stays behind.
    std::vector<std::vector<float>> data(50, std::vector<float>(8, 1.0f));
    for (size_t i = 0; i < data.size(); ++i) {
      StatusOr<Handle> dropped =
          rt.AllreduceAsync("dropped/" + std::to_string(i), Floats(data[i]), Floats(data[i]));
      if (!dropped.ok()) return dropped.status().ToString();
    }
    s = rt.Barrier();
    if (!s.ok()) return s.ToString();
    std::vector<float> last(8, 1.0f);
    s = rt.Allreduce("after", Floats(last), Floats(last));
    return s.ok() ? "" : s.ToString();
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE(
    "AllreduceAsyncDriven returns the op's handle, complete when the peers were there, still "
    "running (and finished by kolo's thread) when one is late; enqueue errors come back",
    "[runtime][handle]") {
  Watchdog watchdog("driven handles", std::chrono::seconds(60));
  LocalJob job(2);
  // Every rank at once, many times: exact results, each handle complete or completing.
  auto failures = job.RunOnAllRanks([](Runtime& rt) -> std::string {
    for (int step = 0; step < 200; ++step) {
      std::vector<float> v(64, static_cast<float>(rt.rank() + step));
      StatusOr<Handle> h = rt.AllreduceAsyncDriven("driven", Floats(v), Floats(v));
      if (!h.ok()) return h.status().ToString();
      Status s = synchronize(*h);
      if (!s.ok()) return "step " + std::to_string(step) + ": " + s.ToString();
      if (v[63] != static_cast<float>(1 + 2 * step)) {
        return "step " + std::to_string(step) + ": got " + std::to_string(v[63]);
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
  // Rank 1 late: rank 0's call gives up driving after its wait budget and hands the op on.
  std::vector<float> x0(4, 1.0f), x1(4, 2.0f);
  StatusOr<Handle> h = job.rank(0).AllreduceAsyncDriven("late", Floats(x0), Floats(x0));
  REQUIRE(h.ok());
  CHECK_FALSE(poll(*h));
  REQUIRE(job.rank(1).Allreduce("late", Floats(x1), Floats(x1)).ok());
  CHECK(synchronize(*h).ok());
  CHECK(x0 == std::vector<float>(4, 3.0f));
  // An enqueue error is the call's result; no op was queued.
  StatusOr<Handle> bad = job.rank(0).AllreduceAsyncDriven("", Floats(x0), Floats(x0));
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
}
