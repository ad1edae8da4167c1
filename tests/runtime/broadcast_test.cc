// Broadcast and barrier through the public API, over real gRPC and loopback sockets.
#include <atomic>
#include <catch2/catch.hpp>

#include "core/config/config_table.h"
#include "tests/support/local_job.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

using kolo::testing::kAllDataTypes;

// Every rank holds its own values; after the broadcast every rank must hold the root's.
std::string CheckBroadcast(Runtime& rt, const std::string& name, DataType dtype, int64_t count,
                           int root) {
  std::vector<uint8_t> data = kolo::testing::MakeInput(dtype, count, rt.rank(), ReduceOp::kSum);
  const std::vector<uint8_t> expected =
      kolo::testing::MakeInput(dtype, count, root, ReduceOp::kSum);
  TensorView view{data.data(), dtype, {count}, Device::Cpu()};
  Status s = rt.Broadcast(name, view, root);
  if (!s.ok()) return name + ": " + s.ToString();
  if (data != expected) return name + ": rank " + std::to_string(rt.rank()) + " differs";
  return "";
}

// Out of place: every rank's output must hold the root's input; no input may change.
std::string CheckOutOfPlace(Runtime& rt, const std::string& name, DataType dtype, int64_t count,
                            int root) {
  const std::vector<uint8_t> input =
      kolo::testing::MakeInput(dtype, count, rt.rank(), ReduceOp::kSum);
  std::vector<uint8_t> data = input;
  std::vector<uint8_t> output(input.size(), 0xAB);
  const std::vector<uint8_t> expected =
      kolo::testing::MakeInput(dtype, count, root, ReduceOp::kSum);
  // The output has another shape with the same elements ([count] against [1, count]).
  Status s = rt.Broadcast(name, {data.data(), dtype, {count}, Device::Cpu()},
                          {output.data(), dtype, {1, count}, Device::Cpu()}, root);
  if (!s.ok()) return name + ": " + s.ToString();
  if (output != expected) return name + ": rank " + std::to_string(rt.rank()) + " differs";
  if (data != input) return name + ": rank " + std::to_string(rt.rank()) + " changed its input";
  return "";
}

}  // namespace

TEST_CASE("Broadcast copies the root's tensor to every rank, for every root and dtype",
          "[runtime][broadcast]") {
  const int n = GENERATE(1, 2, 3, 4, 6);
  Watchdog watchdog("broadcast sweep with " + std::to_string(n) + " ranks",
                    std::chrono::seconds(90));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    for (int root = 0; root < n; ++root) {
      for (DataType dtype : kAllDataTypes) {
        for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{13}}) {
          std::string e = CheckBroadcast(rt, DataTypeName(dtype) + "/" + std::to_string(count),
                                         dtype, count, root);
          if (!e.empty()) return e;
        }
      }
      // Several MiB with an odd element count, so the chain pipelines partial sends.
      std::string e = CheckBroadcast(rt, "big", DataType::kFloat64, (3 << 20) / 8 + 3, root);
      if (!e.empty()) return e;
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Out-of-place broadcast fills every output with the root's input, inputs untouched",
          "[runtime][broadcast]") {
  const int n = GENERATE(1, 2, 3, 4);
  const std::string transport = GENERATE("tcp", "auto");  // auto: shared memory on one host
  Watchdog watchdog("out-of-place broadcast with " + std::to_string(n) + " ranks over " + transport,
                    std::chrono::seconds(90));
  LocalJob job(n, [&](Options& o) { o.transport = *TransportFromName(transport); });
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    for (int root = 0; root < n; ++root) {
      for (DataType dtype : kAllDataTypes) {
        for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{13}}) {
          std::string e = CheckOutOfPlace(
              rt, "oop/" + DataTypeName(dtype) + "/" + std::to_string(count), dtype, count, root);
          if (!e.empty()) return e;
        }
      }
      std::string e = CheckOutOfPlace(rt, "oop/big", DataType::kFloat64, (3 << 20) / 8 + 3, root);
      if (!e.empty()) return e;
    }
    // The two-buffer form with one buffer is the in-place broadcast.
    float x[3] = {1.0f * rt.rank(), 2, 3};
    TensorView view{x, DataType::kFloat32, {3}, Device::Cpu()};
    Status s = rt.Broadcast("same", view, view, n - 1);
    if (!s.ok()) return s.ToString();
    return x[0] == n - 1 ? "" : "in place through the two-buffer form: wrong value";
  });
  CHECK(failures == std::vector<std::string>{});

  float in[4] = {1, 2, 3, 4};
  double out[4];
  Status s = job.rank(0).BroadcastAsync("types", {in, DataType::kFloat32, {4}, Device::Cpu()},
                                        {out, DataType::kFloat64, {4}, Device::Cpu()}, 0,
                                        [](const Status&) {});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "broadcast 'types': input is float32 but output is float64");
}

TEST_CASE("Broadcast argument errors: a bad root at enqueue, disagreeing roots everywhere",
          "[runtime][broadcast][errors]") {
  Watchdog watchdog("broadcast errors", std::chrono::seconds(60));
  LocalJob job(2);
  float x[3] = {1, 2, 3};
  TensorView view{x, DataType::kFloat32, {3}, Device::Cpu()};
  Status bad_root = job.rank(0).BroadcastAsync("b", view, 2, [](const Status&) {});
  CHECK(bad_root.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad_root.message(), Catch::Contains("'b'") && Catch::Contains("root rank 2"));

  std::vector<std::string> messages(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    float y[3] = {1, 2, 3};
    TensorView v{y, DataType::kFloat32, {3}, Device::Cpu()};
    Status s = rt.Broadcast("roots", v, rt.rank());  // each rank names itself the root
    messages[rt.rank()] = s.message();
    if (s.code() != StatusCode::kMismatch) return "expected a mismatch, got " + s.ToString();
    Status after = rt.Broadcast("after", v, 0);  // the job goes on
    return after.ok() ? "" : after.ToString();
  });
  CHECK(failures == std::vector<std::string>{});
  CHECK(messages[0] == messages[1]);
  CHECK_THAT(messages[0], Catch::Contains("'roots'") && Catch::Contains("root"));
}

TEST_CASE("A barrier completes on no rank before every rank has entered it", "[runtime][barrier]") {
  const int n = GENERATE(1, 3);
  Watchdog watchdog("barrier", std::chrono::seconds(60));
  LocalJob job(n);
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> entered{0};
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      ++entered;
      Status s = rt.Barrier();
      if (!s.ok()) return s.ToString();
      // Everyone's increment happened before anyone's barrier could complete.
      return entered.load() == n
                 ? ""
                 : "left the barrier with only " + std::to_string(entered.load()) + " ranks in";
    });
    CHECK(failures == std::vector<std::string>{});
  }
}
