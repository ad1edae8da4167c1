// Tests of ops/recursive_doubling.h over real loopback TCP (transport::TcpMesh): 1, 2 and 4
// ranks as threads, every dtype and op, counts 0, 1, a prime and uneven sizes, fused
// (segmented) buffers, every rank ending with the same bits from random inputs (NaN payloads
// included); and the error paths: a world size that is not a power of two, a message larger
// than the scratch, a lost peer, a silent peer past the deadline, an interrupt.
#include "ops/recursive_doubling.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/ops/loopback_ring.h"
#include "tests/ops/pairwise_allreduce_runs.h"
#include "tests/ops/ring_reference.h"
#include "tests/support/watchdog.h"

namespace kolo::ops {
namespace {

using namespace std::chrono_literals;
using testing::ElementBuffer;

TEST_CASE("recursive doubling matches a direct computation for every dtype and op",
          "[ops][recursive_doubling][tcp]") {
  const int n = GENERATE(1, 2, 4);
  const int pieces = GENERATE(1, 4);
  testing::Watchdog watchdog("recursive doubling, n=" + std::to_string(n), 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  // Busy polling (transport/tcp/stream_pump.h) on and off: the pump's two ways of waiting.
  const bool busy_poll = GENERATE(false, true);
  for (auto& mesh : *meshes) mesh->SetLocalRanks(busy_poll ? 1 : 1 << 20);
  const std::vector<size_t> counts = {0, 1, 3, 13, 1031, 16411};
  for (const std::string& failure : testing::RunAllreduceCases(
           RecursiveDoublingAllreduce, *meshes, counts, pieces, 1, RingScratch::kDefaultBytes))
    CHECK(failure == "");
}

TEST_CASE("recursive doubling leaves the same bits on every rank, NaN payloads included",
          "[ops][recursive_doubling][tcp]") {
  const int n = GENERATE(2, 4);
  const DataType dtype = GENERATE(DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32);
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kProduct);
  testing::Watchdog watchdog("recursive doubling bits, n=" + std::to_string(n), 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  // Random bit patterns: about 3% of float16 values are NaNs with random payloads, so the
  // order of the operands shows in the result wherever two NaNs meet.
  const size_t count = 8191;
  std::vector<ElementBuffer> buffers;
  for (int rank = 0; rank < n; ++rank) {
    buffers.emplace_back(dtype, count);
    std::mt19937 rng(static_cast<uint32_t>(rank + 1));
    uint8_t* bytes = static_cast<uint8_t*>(buffers.back().data());
    for (size_t i = 0; i < buffers.back().bytes(); ++i) bytes[i] = static_cast<uint8_t>(rng());
  }
  const std::vector<std::string> failures = testing::RunOnRanks(n, [&](int rank) {
    RingScratch scratch;
    const Status status = RecursiveDoublingAllreduce(
        *(*meshes)[rank], SegmentedBuffer(buffers[rank].data(), buffers[rank].bytes()), dtype, op,
        scratch, "allreduce 'random'");
    if (!status.ok()) testing::InterruptAll(*meshes, "rank " + std::to_string(rank) + " failed");
    return status.ok() ? std::string() : status.ToString();
  });
  for (const std::string& failure : failures) REQUIRE(failure == "");
  for (int rank = 1; rank < n; ++rank) {
    INFO(DataTypeName(dtype) << " " << ReduceOpName(op) << ": rank " << rank << " vs rank 0");
    CHECK(testing::BytesEqual(buffers[rank], buffers[0]));
  }
}

TEST_CASE("recursive doubling refuses a world size that is not a power of two",
          "[ops][recursive_doubling][tcp]") {
  testing::Watchdog watchdog("recursive doubling, 3 ranks", 30s);
  const testing::FaultRun run = testing::RunOnRankZero(
      RecursiveDoublingAllreduce, 3, 10, testing::BreakNothing, 10, "allreduce 'odd'");
  CHECK(run.status ==
        InvalidArgument(
            "allreduce 'odd': recursive doubling needs a power-of-two number of ranks, not 3"));
}

TEST_CASE("recursive doubling refuses a message larger than its scratch",
          "[ops][recursive_doubling][tcp]") {
  testing::Watchdog watchdog("recursive doubling, small scratch", 30s);
  const testing::FaultRun run =
      testing::RunOnRankZero(RecursiveDoublingAllreduce, 2, 10, testing::BreakNothing, 100,
                             "allreduce 'big'", RingScratch::kMinBytes);
  CHECK(run.status ==
        InvalidArgument(
            "allreduce 'big': 400 bytes do not fit the recursive-doubling scratch of 64"));
}

TEST_CASE("recursive doubling names the op and the peer when the peer is lost",
          "[ops][recursive_doubling][tcp]") {
  testing::Watchdog watchdog("recursive doubling, lost peer", 30s);
  const testing::FaultRun run = testing::RunOnRankZero(
      RecursiveDoublingAllreduce, 2, 10, [](testing::Meshes& m) { m[1].reset(); }, 1000,
      "allreduce 'grad/w1'");
  CHECK(run.status == Unavailable("allreduce 'grad/w1': rank 1 closed the connection"));
}

TEST_CASE("recursive doubling fails by the deadline when the peer stays silent",
          "[ops][recursive_doubling][tcp]") {
  testing::Watchdog watchdog("recursive doubling, silent peer", 30s);
  const double timeout_seconds = 0.5;
  const testing::FaultRun run =
      testing::RunOnRankZero(RecursiveDoublingAllreduce, 2, timeout_seconds, testing::BreakNothing,
                             100, "allreduce 'silent'");
  CHECK(run.status.code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(run.status.message(), Catch::StartsWith("allreduce 'silent': no data from rank 1"));
  CHECK(run.seconds < 4 * timeout_seconds);
}

TEST_CASE("recursive doubling returns the interrupt status", "[ops][recursive_doubling][tcp]") {
  testing::Watchdog watchdog("recursive doubling, interrupt", 30s);
  const testing::FaultRun run = testing::RunOnRankZero(
      RecursiveDoublingAllreduce, 2, 10,
      [](testing::Meshes& m) { m[0]->Interrupt(Aborted("rank 1 was lost")); }, 10, "allreduce 'x'");
  CHECK(run.status == Aborted("rank 1 was lost"));
}

TEST_CASE("IsPowerOfTwo", "[ops][recursive_doubling]") {
  CHECK_FALSE(IsPowerOfTwo(0));
  CHECK(IsPowerOfTwo(1));
  CHECK(IsPowerOfTwo(2));
  CHECK_FALSE(IsPowerOfTwo(3));
  CHECK(IsPowerOfTwo(4));
  CHECK_FALSE(IsPowerOfTwo(6));
  CHECK(IsPowerOfTwo(1 << 20));
  CHECK_FALSE(IsPowerOfTwo(-4));
}

}  // namespace
}  // namespace kolo::ops
