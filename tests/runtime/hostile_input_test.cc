// Careless input (issue 19). At enqueue (items 3 and 4): a shape whose size overflows or
// passes the controller's byte limit, and a tensor name that is not valid UTF-8, are refused
// on the rank that passed them, with INVALID_ARGUMENT, before anything reaches the
// controller; the job goes on (2-rank jobs over real gRPC and loopback sockets; only rank 1
// errs). At init (item 6): ranks that disagree on KOLO_TRANSPORT fail at once.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "core/wire_limits.h"
#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::PickFreePort;
using kolo::testing::Watchdog;

namespace {

// An allreduce every rank runs after the bad op: the job must be unaffected.
std::string NextOpWorks(Runtime& rt, const std::string& name) {
  float x[3] = {1, 1, 1};
  TensorView view{x, DataType::kFloat32, {3}, Device::Cpu()};
  Status s = rt.Allreduce(name, view, view);
  if (!s.ok()) return "the next op failed: " + s.ToString();
  if (x[0] != static_cast<float>(rt.size())) return "wrong result after the refusal";
  return "";
}

std::string ExpectRefused(const Status& s, const std::string& op,
                          const std::vector<std::string>& needles) {
  if (s.code() != StatusCode::kInvalidArgument) {
    return op + ": expected INVALID_ARGUMENT at enqueue, got " + s.ToString();
  }
  for (const std::string& needle : needles) {
    if (s.message().find(needle) == std::string::npos) {
      return op + ": message '" + s.message() + "' lacks '" + needle + "'";
    }
  }
  return "";
}

// Every op, enqueued with `name` and a tensor of `shape` (float32) that rank 1 never reads:
// the error text of each op that was not refused as expected, else "".
std::string EveryOpRefuses(Runtime& rt, const std::string& name, const std::vector<int64_t>& shape,
                           const std::vector<std::string>& needles) {
  static float dummy[4];
  TensorView view{dummy, DataType::kFloat32, shape, Device::Cpu()};
  const TensorView fine{dummy, DataType::kFloat32, {4}, Device::Cpu()};  // a group's good member
  const Allocator allocate = [](const std::vector<int64_t>&) -> void* { return dummy; };
  std::vector<std::string> errors = {
      ExpectRefused(rt.Allreduce(name, view, view), "allreduce", needles),
      ExpectRefused(rt.Allgather(name, view, allocate), "allgather", needles),
      ExpectRefused(rt.Broadcast(name, view, 0), "broadcast", needles),
      ExpectRefused(
          rt.Broadcast(name, view, TensorView{dummy + 1, DataType::kFloat32, shape, Device::Cpu()},
                       0),
          "out-of-place broadcast", needles),
      ExpectRefused(rt.Alltoall(name, view, {}, allocate), "alltoall", needles),
      ExpectRefused(rt.Reducescatter(name, view, view), "reducescatter", needles),
      ExpectRefused(rt.GroupedAllreduce({"fine", name}, {fine, view}, {fine, view}),
                    "grouped allreduce", needles),
  };
  std::string all;
  for (const std::string& e : errors) all += e.empty() ? "" : e + "; ";
  return all;
}

}  // namespace

TEST_CASE("Shapes over the byte limit or overflowing int64 are refused at enqueue",
          "[runtime][hostile]") {
  Watchdog watchdog("oversized shapes", std::chrono::seconds(90));
  LocalJob job(2);
  const std::vector<std::vector<int64_t>> shapes = {
      {int64_t{1} << 62, 8},                     // bytes overflow int64
      {int64_t{1} << 32, int64_t{1} << 32},      // the element count overflows int64
      {int64_t{1} << 40},                        // 4 TiB of float32
      {(int64_t{1} << 38) + 1},                  // one float over 1 TiB
      {0, int64_t{1} << 62},                     // empty, but its rows are over the limit
      {int64_t{1} << 62, int64_t{1} << 62, 0}};  // ditto, and their product overflows
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::string errors;  // the next op runs whatever happened, or rank 0 would wait for it
    if (rt.rank() == 1) {
      for (const auto& shape : shapes) {
        std::string e = EveryOpRefuses(
            rt, "huge", shape,
            {"'huge'", ShapeToString(shape), std::to_string(kMaxTensorBytes) + " bytes"});
        if (!e.empty()) errors += ShapeToString(shape) + ": " + e;
      }
    }
    return errors + NextOpWorks(rt, "after-huge");
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("The largest tensor the controller accepts passes the enqueue check",
          "[runtime][hostile]") {
  // Exactly kMaxTensorBytes, refused at enqueue for another reason (a null pointer) that comes
  // after the size check: so the enqueue and the controller draw the line at the same byte.
  Watchdog watchdog("limit boundary", std::chrono::seconds(60));
  LocalJob job(1);
  TensorView view{nullptr, DataType::kFloat32, {kMaxTensorBytes / 4}, Device::Cpu()};
  Status s = job.rank(0).Allreduce("edge", view, view);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("null data pointer"));
}

TEST_CASE("A tensor name that is not valid UTF-8 is refused at enqueue with its byte offset",
          "[runtime][hostile]") {
  Watchdog watchdog("non-UTF-8 names", std::chrono::seconds(90));
  LocalJob job(2);
  const std::vector<std::pair<std::string, int>> names = {
      {std::string("grad/\xff"), 5},            // never a UTF-8 byte
      {std::string("w\xc3"), 1},                // truncated two-byte sequence
      {std::string("ab\xc0\xaf"), 2},           // overlong '/'
      {std::string("\xed\xa0\x80x"), 0},        // a UTF-16 surrogate
      {std::string("ok\xe2\x82\xac\x80"), 5}};  // a valid euro sign, then a stray continuation
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::string errors;  // the next op runs whatever happened, or rank 0 would wait for it
    if (rt.rank() == 1) {
      for (const auto& [name, offset] : names) {
        std::string e =
            EveryOpRefuses(rt, name, {4}, {"not valid UTF-8", "byte " + std::to_string(offset)});
        if (!e.empty()) errors += "name at offset " + std::to_string(offset) + ": " + e;
      }
    }
    // A valid multi-byte name still works on every rank.
    return errors + NextOpWorks(rt, "grad/\xc3\xa9t\xc3\xa9/\xe2\x82\xac");
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Ranks that disagree on KOLO_TRANSPORT fail init at once, naming both settings",
          "[runtime][hostile]") {
  Watchdog watchdog("transport mismatch", std::chrono::seconds(60));
  const int port = PickFreePort();
  std::vector<Options> all(2);
  for (int r = 0; r < 2; ++r) {
    all[r].rank = r;
    all[r].size = 2;
    all[r].controller_address = "127.0.0.1:" + std::to_string(port);
    all[r].secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    all[r].timeout_seconds = 30;  // the wait the mismatch used to take, then blame a live rank
    all[r].start_timeout_seconds = 30;
    all[r].log_level = "off";
    all[r].transport = r == 0 ? Transport::kTcp : Transport::kShm;
  }
  std::vector<Status> statuses(2);
  std::vector<double> seconds(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      const auto start = std::chrono::steady_clock::now();
      statuses[r] = Runtime::Create(all[r]).status();
      seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
  }
  for (auto& t : threads) t.join();
  INFO("init failed after " << seconds[0] << " s and " << seconds[1] << " s");
  CHECK(statuses[0].code() == StatusCode::kFailedPrecondition);
  CHECK(statuses[1].code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(statuses[0].message(),
             Catch::Contains("rank 1 runs with KOLO_TRANSPORT=shm, this rank with "
                             "KOLO_TRANSPORT=tcp") &&
                 Catch::Contains("rank 0"));
  CHECK_THAT(statuses[1].message(),
             Catch::Contains("rank 0 runs with KOLO_TRANSPORT=tcp, this rank with "
                             "KOLO_TRANSPORT=shm") &&
                 Catch::Contains("rank 1"));
  CHECK(seconds[0] < 5.0);  // at once, not after KOLO_TIMEOUT_SECONDS
  CHECK(seconds[1] < 5.0);
}
