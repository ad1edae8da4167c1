// Tests of ops/data_plane_allreduce.h: which algorithm runs for which size and world size, how
// large messages are cut into cache-sized slices, and that messages on either side of both
// thresholds come out right over real loopback TCP for 1 to 4 ranks, contiguous and fused
// (segmented).
#include "ops/data_plane_allreduce.h"

#include <algorithm>
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

// A data plane that records the bytes each Exchange sends and hands the exchange on to the real
// one underneath.
class RecordingPlane : public DataPlane {
 public:
  explicit RecordingPlane(DataPlane& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status Exchange(int send_to, int recv_from, StreamExchange& exchange,
                  const std::string& what) override {
    sent_.push_back(exchange.send_total());
    return inner_.Exchange(send_to, recv_from, exchange, what);
  }
  void Interrupt(const Status& why) override { inner_.Interrupt(why); }
  const std::vector<size_t>& sent() const { return sent_; }

 private:
  DataPlane& inner_;
  std::vector<size_t> sent_;
};

// Reduces `count` elements of RankInput(dtype, kSum) on every rank of `meshes`, as one
// contiguous buffer or as `pieces` pieces of unequal, odd sizes; returns each rank's first
// wrong element or error ("" when right).
std::vector<std::string> ReduceOnAllRanks(testing::Meshes& meshes, DataType dtype, size_t count,
                                          int pieces) {
  const int n = static_cast<int>(meshes.size());
  return testing::RunOnRanks(n, [&](int rank) {
    const std::string what = "allreduce '" + std::to_string(count) + " x " + DataTypeName(dtype) +
                             " in " + std::to_string(pieces) + "'";
    const size_t element = DataTypeSize(dtype);
    ElementBuffer buffer = testing::MakeRankInput(dtype, ReduceOp::kSum, rank, count);
    std::vector<BytePiece> split;
    uint8_t* data = static_cast<uint8_t*>(buffer.data());
    size_t begin = 0;
    for (int p = 0; p < pieces; ++p) {
      // Piece p ends at (p + 1) / pieces of the buffer, moved off any round boundary.
      const size_t end =
          p + 1 == pieces ? count : std::min(count, count * (p + 1) / pieces + 2 * p + 1);
      split.push_back({data + begin * element, (end - begin) * element});
      begin = end;
    }
    RingScratch scratch;
    Status status = DataPlaneAllreduce(*meshes[rank], SegmentedBuffer(split), dtype, ReduceOp::kSum,
                                       scratch, what);
    std::string failure = status.ok() ? "" : status.ToString();
    for (size_t i = 0; failure.empty() && i < count; ++i) {
      const double expected = testing::ReducedInput(dtype, ReduceOp::kSum, n, i);
      if (buffer.Get(i) != expected) {
        failure = what + ": element " + std::to_string(i) + " is " + std::to_string(buffer.Get(i)) +
                  ", expected " + std::to_string(expected);
      }
    }
    if (!failure.empty()) {
      testing::InterruptAll(meshes, "rank " + std::to_string(rank) + " failed");
      return "rank " + std::to_string(rank) + ": " + failure;
    }
    return std::string();
  });
}

// ReduceOnAllRanks, each rank's failure a failed check.
void CheckOnAllRanks(testing::Meshes& meshes, DataType dtype, size_t count, int pieces) {
  for (const std::string& failure : ReduceOnAllRanks(meshes, dtype, count, pieces)) {
    CHECK(failure == "");
  }
}

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

TEST_CASE("messages of two slice sizes or more are cut into slices of one to two slice sizes",
          "[ops][allreduce]") {
  const size_t slice = kAllreduceSliceBytes;
  CHECK(AllreduceSlices(0) == 1);
  CHECK(AllreduceSlices(slice) == 1);
  CHECK(AllreduceSlices(2 * slice - 1) == 1);
  CHECK(AllreduceSlices(2 * slice) == 2);
  CHECK(AllreduceSlices(3 * slice - 1) == 2);  // two slices of 1.5 each, not 2 + 1
  CHECK(AllreduceSlices(16 * slice) == 16);
  CHECK(AllreduceSlices(16 * slice + slice / 2) == 16);
}

TEST_CASE("a 2-rank allreduce of 4 slices runs as 4 ring exchanges of one slice each",
          "[ops][allreduce][tcp]") {
  testing::Watchdog watchdog("sliced allreduce exchanges", 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(2);
  REQUIRE(meshes.status().ToString() == "OK");
  const size_t count = 4 * kAllreduceSliceBytes / sizeof(float);
  std::vector<std::vector<size_t>> sent(2);
  const std::vector<std::string> failures = testing::RunOnRanks(2, [&](int rank) {
    RecordingPlane plane(*(*meshes)[rank]);
    ElementBuffer buffer = testing::MakeRankInput(DataType::kFloat32, ReduceOp::kSum, rank, count);
    RingScratch scratch;
    const Status status = DataPlaneAllreduce(plane, buffer.data(), count, DataType::kFloat32,
                                             ReduceOp::kSum, scratch, "allreduce 'sliced'");
    sent[static_cast<size_t>(rank)] = plane.sent();
    return status.ok() ? std::string() : status.ToString();
  });
  for (const std::string& failure : failures) CHECK(failure == "");
  // Each ring exchange of 2 ranks sends half its slice to reduce and the other half reduced.
  const std::vector<size_t> expected(4, kAllreduceSliceBytes);
  CHECK(sent[0] == expected);
  CHECK(sent[1] == expected);
}

TEST_CASE("sliced allreduces are right for 1-, 2- and 8-byte elements, contiguous and fused",
          "[ops][allreduce][tcp]") {
  const int n = GENERATE(1, 2, 3, 4);
  testing::Watchdog watchdog("sliced allreduce, n=" + std::to_string(n), 90s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  for (DataType dtype : {DataType::kUInt8, DataType::kFloat16, DataType::kFloat64}) {
    const size_t element = DataTypeSize(dtype);
    // Just under two slices (one ring), exactly two, and two and a half plus an odd tail.
    for (size_t count : {2 * kAllreduceSliceBytes / element - 1, 2 * kAllreduceSliceBytes / element,
                         5 * kAllreduceSliceBytes / 2 / element + 3}) {
      for (int pieces : {1, 3}) CheckOnAllRanks(*meshes, dtype, count, pieces);
    }
  }
}

TEST_CASE("data-plane allreduce is right on both sides of the recursive-doubling threshold",
          "[ops][allreduce][tcp]") {
  const int n = GENERATE(1, 2, 3, 4);
  testing::Watchdog watchdog("data-plane allreduce, n=" + std::to_string(n), 60s);
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  const size_t at_threshold =
      (n == 2 ? kRecursiveDoublingMaxBytesTwoRanks : kRecursiveDoublingMaxBytes) / sizeof(float);
  for (size_t count :
       {size_t{0}, size_t{1}, size_t{7}, at_threshold, at_threshold + 1, 3 * at_threshold}) {
    for (int pieces : {1, 2}) CheckOnAllRanks(*meshes, DataType::kFloat32, count, pieces);
  }
}

}  // namespace
}  // namespace kolo::ops
