// Tests of ops/data_plane_allreduce.h: which algorithm runs for which size and world size, and
// that messages on either side of the threshold come out right over real loopback TCP for
// 1 to 4 ranks, contiguous and fused (segmented).
#include "ops/data_plane_allreduce.h"

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

TEST_CASE("recursive doubling runs for small messages on a power-of-two world only",
          "[ops][allreduce]") {
  const size_t scratch = RingScratch::kDefaultBytes;
  CHECK(UseRecursiveDoubling(4096, 2, scratch));
  CHECK(UseRecursiveDoubling(kRecursiveDoublingMaxBytesTwoRanks, 2, scratch));
  CHECK_FALSE(UseRecursiveDoubling(kRecursiveDoublingMaxBytesTwoRanks + 1, 2, scratch));
  CHECK(UseRecursiveDoubling(kRecursiveDoublingMaxBytes, 4, scratch));
  CHECK_FALSE(UseRecursiveDoubling(kRecursiveDoublingMaxBytes + 1, 4, scratch));
  CHECK_FALSE(UseRecursiveDoubling(kRecursiveDoublingMaxBytes + 1, 8, scratch));
  CHECK_FALSE(UseRecursiveDoubling(4096, 1, scratch));
  CHECK_FALSE(UseRecursiveDoubling(4096, 3, scratch));
  CHECK_FALSE(UseRecursiveDoubling(4096, 6, scratch));
  CHECK_FALSE(UseRecursiveDoubling(4096, 2, 4095));  // the partner's buffer must fit the scratch
}

TEST_CASE("data-plane allreduce is right on both sides of the recursive-doubling threshold",
          "[ops][allreduce][tcp]") {
  const int n = GENERATE(1, 2, 3, 4);
  testing::Watchdog watchdog("data-plane allreduce, n=" + std::to_string(n), 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  const size_t at_threshold =
      (n == 2 ? kRecursiveDoublingMaxBytesTwoRanks : kRecursiveDoublingMaxBytes) / sizeof(float);
  const std::vector<size_t> counts = {0, 1, 7, at_threshold, at_threshold + 1, 3 * at_threshold};
  const std::vector<std::string> failures = testing::RunOnRanks(n, [&](int rank) {
    RingScratch scratch;
    for (size_t count : counts) {
      for (bool fused : {false, true}) {
        const std::string what = "allreduce '" + std::to_string(count) + (fused ? " fused'" : "'");
        ElementBuffer buffer =
            testing::MakeRankInput(DataType::kFloat32, ReduceOp::kSum, rank, count);
        Status status;
        if (fused) {
          uint8_t* data = static_cast<uint8_t*>(buffer.data());
          const size_t half = count / 2 * sizeof(float);
          const SegmentedBuffer pieces({{data, half}, {data + half, count * sizeof(float) - half}});
          status = DataPlaneAllreduce(*(*meshes)[rank], pieces, DataType::kFloat32, ReduceOp::kSum,
                                      scratch, what);
        } else {
          status = DataPlaneAllreduce(*(*meshes)[rank], buffer.data(), count, DataType::kFloat32,
                                      ReduceOp::kSum, scratch, what);
        }
        std::string failure = status.ok() ? "" : status.ToString();
        for (size_t i = 0; failure.empty() && i < count; ++i) {
          const double expected = testing::ReducedInput(DataType::kFloat32, ReduceOp::kSum, n, i);
          if (buffer.Get(i) != expected) {
            failure = what + ": element " + std::to_string(i) + " is " +
                      std::to_string(buffer.Get(i)) + ", expected " + std::to_string(expected);
          }
        }
        if (!failure.empty()) {
          testing::InterruptAll(*meshes, "rank " + std::to_string(rank) + " failed");
          return "rank " + std::to_string(rank) + ": " + failure;
        }
      }
    }
    return std::string();
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

}  // namespace
}  // namespace kolo::ops
