// Tests of ops/ring_allreduce.h over real loopback TCP (transport::TcpMesh): 1..8 ranks as
// threads, every dtype and op, counts 0, 1, below the world size, a prime, and ~3 MiB through
// a scratch smaller than a chunk (odd sizes, so elements arrive split across reads); plus the
// error paths: a lost peer, a silent peer past the deadline, an interrupt.
#include "ops/ring_allreduce.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "tests/ops/ring_reference.h"
#include "tests/support/loopback_mesh.h"
#include "tests/support/watchdog.h"

namespace kolo::ops {
namespace {

using namespace std::chrono_literals;
using testing::ElementBuffer;

struct RingCase {
  size_t count;
  DataType dtype;
  ReduceOp op;
};

std::string Describe(const RingCase& c) {
  return std::to_string(c.count) + " x " + DataTypeName(c.dtype) + " " + ReduceOpName(c.op);
}

// Runs one allreduce on `rank` and compares with the direct computation; "" when it matches.
std::string RunCase(DataPlane& plane, RingScratch& scratch, const RingCase& c) {
  const int n = plane.size();
  ElementBuffer buffer = testing::MakeRankInput(c.dtype, c.op, plane.rank(), c.count);
  const Status status = RingAllreduce(plane, buffer.data(), c.count, c.dtype, c.op, scratch,
                                      "allreduce '" + Describe(c) + "'");
  if (!status.ok()) return status.ToString();
  for (size_t i = 0; i < c.count; ++i) {
    const double expected = testing::ReducedInput(c.dtype, c.op, n, i);  // exact: small ints
    if (buffer.Get(i) != expected) {
      return Describe(c) + ": element " + std::to_string(i) + " is " +
             std::to_string(buffer.Get(i)) + ", expected " + std::to_string(expected);
    }
  }
  return "";
}

// Every rank runs `cases` in order on its mesh; returns the first failure of each rank.
std::vector<std::string> RunCases(testing::Meshes& meshes, const std::vector<RingCase>& cases,
                                  size_t scratch_bytes) {
  return testing::RunOnRanks(static_cast<int>(meshes.size()), [&](int rank) {
    RingScratch scratch(scratch_bytes);
    for (const RingCase& c : cases) {
      std::string failure = RunCase(*meshes[rank], scratch, c);
      if (!failure.empty()) {
        testing::InterruptAll(meshes, "rank " + std::to_string(rank) + " failed");
        return "rank " + std::to_string(rank) + ": " + failure;
      }
    }
    return std::string();
  });
}

TEST_CASE("ring allreduce over TCP matches a direct computation for every dtype and op",
          "[ops][ring][tcp]") {
  const int n = GENERATE(range(1, 9));
  testing::Watchdog watchdog("ring allreduce, every dtype and op, n=" + std::to_string(n), 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  std::vector<RingCase> cases;
  for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{13}, size_t{1031}}) {
    for (int d = 0; d < kNumDataTypes; ++d) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct}) {
        cases.push_back({count, static_cast<DataType>(d), op});
      }
    }
  }
  for (const std::string& failure : RunCases(*meshes, cases, RingScratch::kDefaultBytes)) {
    CHECK(failure == "");
  }
}

TEST_CASE("ring allreduce over TCP pipelines ~3 MiB through a small odd-sized scratch",
          "[ops][ring][tcp]") {
  const int n = GENERATE(2, 3, 5, 8);
  const size_t scratch_bytes = GENERATE(size_t{64 * 1024 + 3}, RingScratch::kDefaultBytes);
  testing::Watchdog watchdog("ring allreduce, 3 MiB, n=" + std::to_string(n), 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  const size_t odd_count = (size_t{3} << 20) / 8 + 1;  // odd, 8-byte elements: > 3 MiB
  const std::vector<RingCase> cases = {
      {odd_count, DataType::kFloat64, ReduceOp::kSum},
      {odd_count, DataType::kInt64, ReduceOp::kMax},
      {odd_count * 2 + 1, DataType::kFloat32, ReduceOp::kSum},
      {odd_count * 4 + 3, DataType::kFloat16, ReduceOp::kSum},
      {odd_count * 4 + 1, DataType::kBFloat16, ReduceOp::kMin},
      {odd_count * 8 + 5, DataType::kInt8, ReduceOp::kProduct},
  };
  for (const std::string& failure : RunCases(*meshes, cases, scratch_bytes)) {
    CHECK(failure == "");
  }
}

TEST_CASE("ring allreduce reuses one scratch across many calls", "[ops][ring][tcp]") {
  testing::Watchdog watchdog("ring allreduce, repeated", 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(3);
  REQUIRE(meshes.status().ToString() == "OK");
  std::vector<RingCase> cases;
  for (size_t count = 0; count < 200; count += 7) {
    cases.push_back({count, DataType::kFloat32, ReduceOp::kSum});
    cases.push_back({count * 3 + 1, DataType::kInt8, ReduceOp::kMax});
  }
  for (const std::string& failure : RunCases(*meshes, cases, RingScratch::kMinBytes)) {
    CHECK(failure == "");
  }
}

TEST_CASE("ring allreduce names the op when a peer is lost", "[ops][ring][tcp]") {
  testing::Watchdog watchdog("ring allreduce, lost peer", 30s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(2);
  REQUIRE(meshes.status().ToString() == "OK");
  (*meshes)[1].reset();  // rank 1's connections close
  std::vector<float> data(1000, 1.0f);
  RingScratch scratch;
  const Status status = RingAllreduce(*(*meshes)[0], data.data(), data.size(), DataType::kFloat32,
                                      ReduceOp::kSum, scratch, "allreduce 'grad/w1'");
  CHECK_FALSE(status.ok());
  CHECK(status.message().rfind("allreduce 'grad/w1'", 0) == 0);
}

TEST_CASE("ring allreduce fails by the deadline when a peer stays silent", "[ops][ring][tcp]") {
  testing::Watchdog watchdog("ring allreduce, silent peer", 30s);
  const double timeout_seconds = 0.5;
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(2, timeout_seconds);
  REQUIRE(meshes.status().ToString() == "OK");
  std::vector<double> data(100, 1.0);
  RingScratch scratch;
  const auto start = std::chrono::steady_clock::now();
  const Status status = RingAllreduce(*(*meshes)[0], data.data(), data.size(), DataType::kFloat64,
                                      ReduceOp::kSum, scratch, "allreduce 'silent'");
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  CHECK(status.code() == StatusCode::kDeadlineExceeded);
  CHECK(status.message().rfind("allreduce 'silent'", 0) == 0);
  CHECK(elapsed.count() < 2 * timeout_seconds);
}

TEST_CASE("ring allreduce returns the interrupt status", "[ops][ring][tcp]") {
  testing::Watchdog watchdog("ring allreduce, interrupt", 30s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(2);
  REQUIRE(meshes.status().ToString() == "OK");
  (*meshes)[0]->Interrupt(Aborted("rank 1 was lost"));
  std::vector<int32_t> data(10, 1);
  RingScratch scratch;
  const Status status = RingAllreduce(*(*meshes)[0], data.data(), data.size(), DataType::kInt32,
                                      ReduceOp::kSum, scratch, "allreduce 'x'");
  CHECK(status == Aborted("rank 1 was lost"));
}

TEST_CASE("ring allreduce on one rank or zero elements returns at once", "[ops][ring]") {
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(1);
  REQUIRE(meshes.status().ToString() == "OK");
  std::vector<float> data = {1.5f, -2.0f};
  RingScratch scratch;
  REQUIRE(RingAllreduce(*(*meshes)[0], data.data(), 2, DataType::kFloat32, ReduceOp::kSum, scratch,
                        "allreduce 'one'")
              .ok());
  CHECK(data == std::vector<float>{1.5f, -2.0f});
}

}  // namespace
}  // namespace kolo::ops
