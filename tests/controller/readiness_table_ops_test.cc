// ReadinessTable's rules for the ops whose ranks may announce different metadata: allgather's
// dimension 0, alltoall's splits, and a joined rank's allreduces.
#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "controller/readiness_table.h"
#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using testing::kT0;
using testing::Meta;

TensorMeta Gather(std::vector<int64_t> shape) {
  TensorMeta meta = Meta("g", std::move(shape));
  meta.op = OpType::kAllgather;
  return meta;
}

TEST_CASE("Allgather lets dimension 0 differ per rank and reports each rank's",
          "[controller][readiness][allgather]") {
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  REQUIRE(table.Announce(1, Gather({5, 2}), kT0, &ready).ok());
  REQUIRE(table.Announce(0, Gather({0, 2}), kT0, &ready).ok());
  REQUIRE(table.Announce(2, Gather({3, 2}), kT0, &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].error.empty());
  CHECK(ready[0].first_dims == std::vector<int64_t>{0, 5, 3});
}

TEST_CASE("Allgather inner dimensions must agree", "[controller][readiness][allgather]") {
  ReadinessTable table(2);
  std::vector<ReadyTensor> ready;
  REQUIRE(table.Announce(0, Gather({4, 3}), kT0, &ready).ok());
  REQUIRE(table.Announce(1, Gather({4, 2}), kT0, &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].error ==
        "Mismatched allgather inner dimensions for 'g': rank 0 sent [4, 3], rank 1 sent [4, 2]");
  ready.clear();
  REQUIRE(table.Announce(0, Gather({4, 3}), kT0, &ready).ok());
  REQUIRE(table.Announce(1, Gather({4, 3, 1}), kT0, &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].error ==
        "Mismatched allgather inner dimensions for 'g': rank 0 sent [4, 3], rank 1 sent [4, 3, 1]");
}

TEST_CASE("Alltoall sends the whole split matrix, row by sending rank",
          "[controller][readiness][alltoall]") {
  ReadinessTable table(2);
  std::vector<ReadyTensor> ready;
  TensorMeta a = Meta("t", {3, 2});
  a.op = OpType::kAlltoall;
  a.splits = {1, 2};
  TensorMeta b = Meta("t", {4, 2});
  b.op = OpType::kAlltoall;
  b.splits = {4, 0};
  REQUIRE(table.Announce(1, b, kT0, &ready).ok());
  REQUIRE(table.Announce(0, a, kT0, &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].error.empty());
  CHECK(ready[0].splits == std::vector<int64_t>{1, 2, 4, 0});
}

TEST_CASE("A joined rank completes allreduces without it and blocks other collectives",
          "[controller][readiness][join]") {
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  TensorMeta join = Meta("kolo.join", {0}, DataType::kUInt8);
  join.op = OpType::kJoin;
  TensorMeta bcast = Meta("b");
  bcast.op = OpType::kBroadcast;
  bcast.root = 0;
  REQUIRE(table.Announce(0, Meta("g"), kT0, &ready).ok());
  REQUIRE(table.Announce(1, Meta("g"), kT0, &ready).ok());
  REQUIRE(table.Announce(0, bcast, kT0, &ready).ok());
  REQUIRE(table.Announce(2, join, kT0, &ready).ok());
  REQUIRE(ready.size() == 2);  // 'g' without rank 2; 'b' cannot run with a joined rank
  CHECK(ready[0].meta.name == "g");
  CHECK(ready[0].error.empty());
  CHECK(ready[1].meta.name == "b");
  CHECK(ready[1].error ==
        "broadcast 'b' cannot run while rank 2 has joined: join supports "
        "only allreduce");
  CHECK(ready[1].error_code == StatusCode::kFailedPrecondition);
  ready.clear();
  REQUIRE(table.Announce(1, join, kT0, &ready).ok());
  REQUIRE(table.Announce(0, join, kT0, &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].meta.op == OpType::kJoin);
  CHECK(ready[0].meta.root == 0);    // the last rank to join
  CHECK_FALSE(table.has_joined(2));  // reset for the next round
}

}  // namespace
}  // namespace kolo::controller
