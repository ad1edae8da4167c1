// Allgather through the public API, over real gRPC and loopback sockets: uneven first
// dimensions (zero included), every dtype, the allocator contract, and mismatches.
#include <catch2/catch.hpp>
#include <future>

#include "tests/support/local_job.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

using kolo::testing::kAllDataTypes;

// Rank r contributes rows(r) rows of `cols` elements; element values encode (rank, index).
int64_t Rows(int rank, int pattern) {
  switch (pattern) {
    case 0:
      return 1;
    case 1:
      return rank == 1 ? 0 : rank + 2;  // uneven, one rank empty
    default:
      return 13 + 7 * rank;  // primes and more
  }
}

std::string CheckAllgather(Runtime& rt, DataType dtype, int pattern, int64_t cols) {
  const int n = rt.size();
  const int64_t rows = Rows(rt.rank(), pattern);
  std::vector<uint8_t> input =
      kolo::testing::MakeInput(dtype, rows * cols, rt.rank(), ReduceOp::kSum);
  TensorView view{input.data(), dtype, {rows, cols}, Device::Cpu()};
  std::vector<uint8_t> output;
  std::vector<int64_t> got_shape;
  const std::string name = DataTypeName(dtype) + "/" + std::to_string(pattern);
  Status s = rt.Allgather(name, view, [&](const std::vector<int64_t>& shape) -> void* {
    got_shape = shape;
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    output.resize(static_cast<size_t>(elements) * DataTypeSize(dtype) + 1);
    return output.data();
  });
  if (!s.ok()) return name + ": " + s.ToString();
  int64_t total_rows = 0;
  std::vector<uint8_t> expected;
  for (int r = 0; r < n; ++r) {
    total_rows += Rows(r, pattern);
    auto part = kolo::testing::MakeInput(dtype, Rows(r, pattern) * cols, r, ReduceOp::kSum);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  if (got_shape != std::vector<int64_t>{total_rows, cols}) {
    return name + ": allocator got shape " + ShapeToString(got_shape);
  }
  output.resize(expected.size());
  if (output != expected) return name + ": wrong data on rank " + std::to_string(rt.rank());
  return "";
}

}  // namespace

TEST_CASE("Allgather concatenates uneven first dimensions for every dtype",
          "[runtime][allgather]") {
  const int n = GENERATE(1, 2, 3, 4);
  Watchdog watchdog("allgather sweep with " + std::to_string(n) + " ranks",
                    std::chrono::seconds(90));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    for (DataType dtype : kAllDataTypes) {
      for (int pattern = 0; pattern < 3; ++pattern) {
        std::string e = CheckAllgather(rt, dtype, pattern, pattern == 2 ? 1031 : 3);
        if (!e.empty()) return e;
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE(
    "Allgather errors: scalars and missing allocators at enqueue, inner dimensions "
    "everywhere, an empty allocator on one rank only",
    "[runtime][allgather][errors]") {
  Watchdog watchdog("allgather errors", std::chrono::seconds(60));
  LocalJob job(2);
  float x[6] = {1, 2, 3, 4, 5, 6};
  TensorView scalar{x, DataType::kFloat32, {}, Device::Cpu()};
  auto alloc = [](const std::vector<int64_t>&) -> void* { return nullptr; };
  CHECK(job.rank(0).AllgatherAsync("s", scalar, alloc, [](const Status&) {}).code() ==
        StatusCode::kInvalidArgument);
  TensorView rows{x, DataType::kFloat32, {2, 3}, Device::Cpu()};
  CHECK(job.rank(0).AllgatherAsync("a", rows, nullptr, [](const Status&) {}).code() ==
        StatusCode::kInvalidArgument);

  std::vector<std::string> messages(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<float> out(64);
    auto into_out = [&](const std::vector<int64_t>&) -> void* { return out.data(); };
    float y[6] = {0};
    TensorView v{y, DataType::kFloat32, {2, rt.rank() == 0 ? 3 : 1}, Device::Cpu()};
    Status s = rt.Allgather("inner", v, into_out);
    messages[rt.rank()] = s.message();
    if (s.code() != StatusCode::kMismatch) return "expected a mismatch, got " + s.ToString();
    // Rank 1's allocator gives nothing: its op fails, rank 0's succeeds, the job goes on.
    TensorView w{y, DataType::kFloat32, {2, 3}, Device::Cpu()};
    auto none = [](const std::vector<int64_t>&) -> void* { return nullptr; };
    s = rt.rank() == 1 ? rt.Allgather("partial", w, none) : rt.Allgather("partial", w, into_out);
    if (rt.rank() == 1 && s.code() != StatusCode::kInvalidArgument) {
      return "expected the allocator failure, got " + s.ToString();
    }
    if (rt.rank() == 0 && !s.ok()) return s.ToString();
    s = rt.Allgather("after", w, into_out);
    return s.ok() ? "" : "job did not go on: " + s.ToString();
  });
  CHECK(failures == std::vector<std::string>{});
  CHECK(messages[0] == messages[1]);
  CHECK_THAT(messages[0], Catch::Contains("inner dimensions") && Catch::Contains("[2, 3]") &&
                              Catch::Contains("[2, 1]"));
}

TEST_CASE("An allocator that returns null for an empty output is not a failure",
          "[runtime][allgather]") {
  const int n = GENERATE(1, 2, 3, 4);
  Watchdog watchdog("allgather of nothing with " + std::to_string(n) + " ranks",
                    std::chrono::seconds(60));
  LocalJob job(n, [](Options& o) { o.cycle_time_ms = 20; });  // the pairs below may fuse
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    // vector::data() of an empty vector may be null: the allocator a binding writes first.
    std::vector<float> empty_output;
    auto into_empty = [&](const std::vector<int64_t>& shape) -> void* {
      if (shape != std::vector<int64_t>{0, 3}) return nullptr;  // fails the op: caught below
      return empty_output.data();
    };
    TensorView none{nullptr, DataType::kFloat32, {0, 3}, Device::Cpu()};
    Status s = rt.Allgather("nothing", none, into_empty);
    if (!s.ok()) return "alone: " + s.ToString();
    // Two at once (fused when planned together), one of them with rows: only the empty one
    // gets a null.
    float rows[3] = {1.0f * rt.rank(), 2, 3};
    std::vector<float> gathered(3 * static_cast<size_t>(rt.size()));
    std::promise<Status> a, b;
    s = rt.AllgatherAsync("nothing/2", none, into_empty,
                          [&](const Status& st) { a.set_value(st); });
    if (!s.ok()) return s.ToString();
    s = rt.AllgatherAsync(
        "rows", {rows, DataType::kFloat32, {1, 3}, Device::Cpu()},
        [&](const std::vector<int64_t>&) -> void* { return gathered.data(); },
        [&](const Status& st) { b.set_value(st); });
    if (!s.ok()) return s.ToString();
    s = a.get_future().get();
    if (!s.ok()) return "fused: " + s.ToString();
    s = b.get_future().get();
    if (!s.ok()) return "rows: " + s.ToString();
    for (int r = 0; r < rt.size(); ++r) {
      if (gathered[3 * r] != r || gathered[3 * r + 2] != 3) return "wrong rows";
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}
