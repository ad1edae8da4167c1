// Tests of ShmAllreduce's staged inputs (ops/shm_allreduce.h, Stage and Run's `staged`;
// docs/FAST-PATH.md, "Staged inputs") with 2..4 thread-ranks over real shared-memory planes:
// every rank stages its input, the ranks meet (a thread barrier standing in for the round's
// messages, which order each rank's copy before its peers' reads), and the staged run, which
// skips the copy in and the first sync, gives every rank the bits of a reduction in rank order;
// an exchange between the staging and the run sends the op the usual way on every rank, with
// the same bits; and what Stage refuses.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ops/reduce_kernels.h"
#include "ops/shm_allreduce.h"
#include "tests/support/rank_threads.h"
#include "tests/support/shm_job.h"
#include "tests/support/watchdog.h"
#include "transport/shm/shm_mesh.h"

namespace kolo::ops {
namespace {

using namespace std::chrono_literals;
using testing::RunOnRanks;
using transport::ShmMesh;

// Rank `rank`'s input number `op`: floats whose sum depends on the order of addition.
std::vector<float> Input(int rank, int op, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t k = i * 7919 + static_cast<size_t>(op) * 31 + static_cast<size_t>(rank) * 104729;
    values[i] = 1.0f / static_cast<float>(1 + k % 1000003);
  }
  return values;
}

// Every rank's input reduced in rank order, 0 first: the bits every rank must hold.
std::vector<float> Expected(int n, int op, size_t count) {
  std::vector<float> result = Input(0, op, count);
  for (int r = 1; r < n; ++r) {
    const std::vector<float> input = Input(r, op, count);
    Reduce(result.data(), input.data(), count, DataType::kFloat32, ReduceOp::kSum);
  }
  return result;
}

// The ranks meet: what each wrote before is visible to all after (the round's messages do
// this in the runtime). `arrived` counts arrivals over all meetings.
void Meet(std::atomic<int>& arrived, int n, int meeting) {
  arrived.fetch_add(1, std::memory_order_acq_rel);
  while (arrived.load(std::memory_order_acquire) < n * (meeting + 1)) std::this_thread::yield();
}

TEST_CASE("a staged allreduce skips its copy in and first sync, with the bits of rank order",
          "[ops][shm]") {
  const int n = GENERATE(2, 3, 4);
  testing::Watchdog watchdog("staged shm allreduce, " + std::to_string(n) + " ranks", 60s);
  testing::ShmJob job = testing::MakeShmJob(n, 64 << 10, ShmMesh::SingleCopy::kOff);
  std::atomic<int> arrived{0};
  const std::vector<size_t> counts = {1, 13, 1021, 4096};  // 4096 floats: kStageMaxBytes
  const std::vector<std::string> failures = RunOnRanks(n, [&](int r) -> std::string {
    ShmAllreduce allreduce(*job.planes[r]);
    int meeting = 0;
    for (int op = 0; op < 2 * static_cast<int>(counts.size()); ++op) {
      const size_t count = counts[static_cast<size_t>(op) % counts.size()];
      const bool in_place = op % 2 == 0;
      std::vector<float> input = Input(r, op, count), output(count, -1.0f);
      float* out = in_place ? input.data() : output.data();
      const std::optional<uint64_t> staged =
          allreduce.Stage(input.data(), count, DataType::kFloat32, 1.0);
      if (!staged.has_value()) return "op " + std::to_string(op) + " was not staged";
      if (*staged != static_cast<uint64_t>(op)) {
        return "staged for exchange " + std::to_string(*staged);
      }
      Meet(arrived, n, meeting++);
      const uint64_t before = allreduce.staged_ops();
      const Status status = allreduce.Run({{input.data(), out, count}}, DataType::kFloat32,
                                          ReduceOp::kSum, ReduceScaling{}, "staged", staged);
      if (!status.ok()) return status.ToString();
      if (allreduce.staged_ops() != before + 1) return "op " + std::to_string(op) + " ran unstaged";
      if (std::memcmp(out, Expected(n, op, count).data(), count * sizeof(float)) != 0) {
        return "op " + std::to_string(op) + " of " + std::to_string(count) + " differs";
      }
    }
    return "";
  });
  for (const std::string& failure : testing::Failures(failures)) CHECK(failure == "");
}

TEST_CASE("an exchange between the staging and the run sends the op the usual way", "[ops][shm]") {
  const int n = GENERATE(2, 3);
  testing::Watchdog watchdog("staged shm allreduce overtaken, " + std::to_string(n) + " ranks",
                             60s);
  testing::ShmJob job = testing::MakeShmJob(n, 64 << 10, ShmMesh::SingleCopy::kOff);
  std::atomic<int> arrived{0};
  const size_t count = 1021;
  const std::vector<std::string> failures = RunOnRanks(n, [&](int r) -> std::string {
    ShmAllreduce allreduce(*job.planes[r]);
    std::vector<float> staged_input = Input(r, 0, count), other = Input(r, 1, count);
    const std::optional<uint64_t> staged =
        allreduce.Stage(staged_input.data(), count, DataType::kFloat32, 1.0);
    if (!staged.has_value()) return std::string("not staged");
    Meet(arrived, n, 0);
    // Another op takes the exchange the first was staged for (and its set's slots).
    Status status = allreduce.Run({{other.data(), other.data(), count}}, DataType::kFloat32,
                                  ReduceOp::kSum, ReduceScaling{}, "other");
    if (!status.ok()) return status.ToString();
    if (std::memcmp(other.data(), Expected(n, 1, count).data(), count * sizeof(float)) != 0) {
      return std::string("the other op differs");
    }
    status = allreduce.Run({{staged_input.data(), staged_input.data(), count}}, DataType::kFloat32,
                           ReduceOp::kSum, ReduceScaling{}, "staged", staged);
    if (!status.ok()) return status.ToString();
    if (allreduce.staged_ops() != 0) return std::string("ran staged for a stale exchange");
    if (std::memcmp(staged_input.data(), Expected(n, 0, count).data(), count * sizeof(float)) !=
        0) {
      return std::string("the staged op differs");
    }
    return std::string();
  });
  for (const std::string& failure : testing::Failures(failures)) CHECK(failure == "");
}

TEST_CASE("Stage refuses what would not run as one staged chunk", "[ops][shm]") {
  testing::Watchdog watchdog("shm allreduce stage refusals", 60s);
  std::vector<float> big((ShmAllreduce::kStageMaxBytes / sizeof(float)) + 1, 1.0f);
  SECTION("a prescale, more than kStageMaxBytes, more than a slot, nothing") {
    testing::ShmJob job = testing::MakeShmJob(2, 1024, ShmMesh::SingleCopy::kOff);
    ShmAllreduce allreduce(*job.planes[0]);
    CHECK_FALSE(allreduce.Stage(big.data(), 16, DataType::kFloat32, 0.5).has_value());
    CHECK_FALSE(allreduce.Stage(big.data(), big.size(), DataType::kFloat32, 1.0).has_value());
    CHECK_FALSE(allreduce.Stage(big.data(), 257, DataType::kFloat32, 1.0).has_value());  // 1 KiB
    CHECK_FALSE(allreduce.Stage(big.data(), 0, DataType::kFloat32, 1.0).has_value());
    CHECK(allreduce.Stage(big.data(), 256, DataType::kFloat32, 1.0) == std::optional<uint64_t>(0));
  }
  SECTION("one rank") {
    testing::ShmJob job = testing::MakeShmJob(1, 64 << 10, ShmMesh::SingleCopy::kOff);
    ShmAllreduce allreduce(*job.planes[0]);
    CHECK_FALSE(allreduce.Stage(big.data(), 16, DataType::kFloat32, 1.0).has_value());
  }
  SECTION("an op that goes single copy") {
    testing::ShmJob job = testing::MakeShmJob(2, 64 << 10, ShmMesh::SingleCopy::kOn);
    REQUIRE(job.planes[0]->single_copy());  // kOn fails the plane's creation where refused
    ShmAllreduce allreduce(*job.planes[0], ShmSingleCopy::Tuning{128, 1});
    CHECK_FALSE(allreduce.Stage(big.data(), 16, DataType::kFloat32, 1.0).has_value());
  }
}

}  // namespace
}  // namespace kolo::ops
