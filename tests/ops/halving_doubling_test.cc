// Tests of ops/halving_doubling.h: the schedule as a plain function (partners agree on what
// they swap; every chunk ends reduced on exactly one rank and then reaches all), and the
// allreduce over real loopback TCP for 1, 2, 4 and 8 ranks, every dtype and op, counts 0, 1,
// below the world size, a prime and ~1 MiB through a small scratch, fused (segmented) buffers,
// the same bits on every rank from random inputs; and the error paths.
#include "ops/halving_doubling.h"

#include <catch2/catch.hpp>
#include <chrono>
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

bool SameRange(const ElementRange& a, const ElementRange& b) {
  return a.begin == b.begin && a.count == b.count;
}

TEST_CASE("halving-doubling partners swap matching ranges and the halves tile the buffer",
          "[ops][halving_doubling]") {
  const int n = GENERATE(2, 4, 8, 16);
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{5}, size_t{1031});
  std::vector<std::vector<HalvingDoublingStep>> schedules;
  for (int rank = 0; rank < n; ++rank) schedules.push_back(HalvingDoublingSchedule(count, rank, n));
  for (int rank = 0; rank < n; ++rank) {
    INFO("n " << n << " count " << count << " rank " << rank);
    REQUIRE(schedules[rank].size() == 2 * static_cast<size_t>(__builtin_ctz(n)));
    for (size_t k = 0; k < schedules[rank].size(); ++k) {
      const HalvingDoublingStep& mine = schedules[rank][k];
      const HalvingDoublingStep& theirs = schedules[mine.partner][k];
      CHECK(theirs.partner == rank);
      CHECK(SameRange(mine.send, theirs.recv));
      CHECK(SameRange(mine.recv, theirs.send));
      CHECK(mine.reduce == (k < schedules[rank].size() / 2));
    }
    // After the halving, the rank keeps chunk `rank`; the last doubling step ends whole.
    const HalvingDoublingStep& last_halving = schedules[rank][schedules[rank].size() / 2 - 1];
    CHECK(SameRange(last_halving.recv, ChunkRange(count, n, rank)));
    const HalvingDoublingStep& last = schedules[rank].back();
    CHECK(std::min(last.send.begin, last.recv.begin) == 0);
    CHECK(last.send.count + last.recv.count == count);
  }
}

TEST_CASE("halving-doubling matches a direct computation for every dtype and op",
          "[ops][halving_doubling][tcp]") {
  const int n = GENERATE(1, 2, 4, 8);
  const int pieces = GENERATE(1, 5);
  testing::Watchdog watchdog("halving-doubling, n=" + std::to_string(n), 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  // Busy polling (transport/tcp/stream_pump.h) on and off: the pump's two ways of waiting.
  const bool busy_poll = GENERATE(false, true);
  for (auto& mesh : *meshes) mesh->SetLocalRanks(busy_poll ? 1 : 1 << 20);
  const std::vector<size_t> counts = {0, 1, 3, 13, 1031};
  for (const std::string& failure : testing::RunAllreduceCases(
           HalvingDoublingAllreduce, *meshes, counts, pieces, 3, RingScratch::kDefaultBytes)) {
    CHECK(failure == "");
  }
}

TEST_CASE("halving-doubling pipelines ~1 MiB through a small odd-sized scratch",
          "[ops][halving_doubling][tcp]") {
  const int n = GENERATE(2, 4);
  testing::Watchdog watchdog("halving-doubling, 1 MiB, n=" + std::to_string(n), 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  for (const std::string& failure : testing::RunAllreduceCases(
           HalvingDoublingAllreduce, *meshes, {(size_t{1} << 17) + 7}, 3, 3, 4096 + 3)) {
    CHECK(failure == "");
  }
}

TEST_CASE("halving-doubling leaves the same bits on every rank from random inputs",
          "[ops][halving_doubling][tcp]") {
  const int n = 4;
  const DataType dtype = GENERATE(DataType::kFloat16, DataType::kFloat32);
  testing::Watchdog watchdog("halving-doubling bits", 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  const size_t count = 100003;
  std::vector<ElementBuffer> buffers;
  for (int rank = 0; rank < n; ++rank) {
    buffers.emplace_back(dtype, count);
    std::mt19937 rng(static_cast<uint32_t>(rank + 1));
    uint8_t* bytes = static_cast<uint8_t*>(buffers.back().data());
    for (size_t i = 0; i < buffers.back().bytes(); ++i) bytes[i] = static_cast<uint8_t>(rng());
  }
  const std::vector<std::string> failures = testing::RunOnRanks(n, [&](int rank) {
    RingScratch scratch;
    const Status status = HalvingDoublingAllreduce(
        *(*meshes)[rank], SegmentedBuffer(buffers[rank].data(), buffers[rank].bytes()), dtype,
        ReduceOp::kSum, scratch, "allreduce 'random'");
    if (!status.ok()) testing::InterruptAll(*meshes, "rank " + std::to_string(rank) + " failed");
    return status.ok() ? std::string() : status.ToString();
  });
  for (const std::string& failure : failures) REQUIRE(failure == "");
  for (int rank = 1; rank < n; ++rank) CHECK(testing::BytesEqual(buffers[rank], buffers[0]));
}

TEST_CASE("halving-doubling refuses a world size that is not a power of two",
          "[ops][halving_doubling][tcp]") {
  testing::Watchdog watchdog("halving-doubling, 3 ranks", 30s);
  const testing::FaultRun run = testing::RunOnRankZero(
      HalvingDoublingAllreduce, 3, 10, testing::BreakNothing, 10, "allreduce 'odd'");
  CHECK(run.status ==
        InvalidArgument(
            "allreduce 'odd': halving-doubling needs a power-of-two number of ranks, not 3"));
}

TEST_CASE("halving-doubling names the op and the peer when a peer is lost",
          "[ops][halving_doubling][tcp]") {
  testing::Watchdog watchdog("halving-doubling, lost peer", 30s);
  // Rank 0's first partner (distance n/2) closes its connections.
  const testing::FaultRun run = testing::RunOnRankZero(
      HalvingDoublingAllreduce, 4, 10, [](testing::Meshes& m) { m[2].reset(); }, 1000,
      "allreduce 'grad/w1'");
  CHECK(run.status == Unavailable("allreduce 'grad/w1': rank 2 closed the connection"));
}

TEST_CASE("halving-doubling fails by the deadline when a peer stays silent",
          "[ops][halving_doubling][tcp]") {
  testing::Watchdog watchdog("halving-doubling, silent peer", 30s);
  const double timeout_seconds = 0.5;
  const testing::FaultRun run =
      testing::RunOnRankZero(HalvingDoublingAllreduce, 4, timeout_seconds, testing::BreakNothing,
                             100, "allreduce 'silent'");
  CHECK(run.status.code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(run.status.message(), Catch::StartsWith("allreduce 'silent': no data from rank 2"));
  CHECK(run.seconds < 4 * timeout_seconds);
}

TEST_CASE("halving-doubling returns the interrupt status", "[ops][halving_doubling][tcp]") {
  testing::Watchdog watchdog("halving-doubling, interrupt", 30s);
  const testing::FaultRun run = testing::RunOnRankZero(
      HalvingDoublingAllreduce, 2, 10,
      [](testing::Meshes& m) { m[0]->Interrupt(Aborted("rank 1 was lost")); }, 10, "allreduce 'x'");
  CHECK(run.status == Aborted("rank 1 was lost"));
}

}  // namespace
}  // namespace kolo::ops
