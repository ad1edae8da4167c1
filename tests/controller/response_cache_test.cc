#include "controller/response_cache.h"

#include <catch2/catch.hpp>

#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using testing::Meta;

TEST_CASE("Cache ids are 1, 2, 3 in commit order and stable for the same metadata",
          "[controller][cache]") {
  ResponseCache cache(8);
  CHECK(cache.Commit(Meta("a")) == 1);
  CHECK(cache.Commit(Meta("b")) == 2);
  CHECK(cache.Commit(Meta("a")) == 1);
  CHECK(cache.IdOf("b") == 2);
  CHECK(cache.IdOf("c") == 0);
  REQUIRE(cache.Lookup(2) != nullptr);
  CHECK(cache.Lookup(2)->meta == Meta("b"));
  CHECK(cache.Lookup(0) == nullptr);
  CHECK(cache.Lookup(3) == nullptr);
  CHECK(cache.size() == 2);
}

TEST_CASE("Changed metadata replaces a name's entry with a fresh id", "[controller][cache]") {
  ResponseCache cache(1);
  REQUIRE(cache.Commit(Meta("a", {4})) == 1);
  CHECK(cache.Commit(Meta("a", {8})) == 2);  // no free slot needed
  CHECK(cache.Lookup(1) == nullptr);         // the old id is retired
  REQUIRE(cache.Lookup(2) != nullptr);
  CHECK(cache.Lookup(2)->meta.shape == std::vector<int64_t>{8});
  CHECK(cache.size() == 1);
}

TEST_CASE("Once full, new names are not cached", "[controller][cache]") {
  const int capacity = GENERATE(0, 1, 3);
  ResponseCache cache(capacity);
  for (int i = 0; i < capacity; ++i) {
    CHECK(cache.Commit(Meta("t" + std::to_string(i))) == static_cast<uint32_t>(i + 1));
  }
  CHECK(cache.Commit(Meta("extra")) == 0);
  CHECK(cache.IdOf("extra") == 0);
  CHECK(cache.size() == capacity);
  if (capacity > 0) CHECK(cache.Commit(Meta("t0")) == 1);
}

TEST_CASE("Ops a joined rank cannot stand in for get ids with the every-rank bit",
          "[controller][cache]") {
  ResponseCache cache(8);
  TensorMeta broadcast = Meta("b");
  broadcast.op = OpType::kBroadcast;
  broadcast.root = 1;
  TensorMeta reducescatter = Meta("r");
  reducescatter.op = OpType::kReducescatter;
  CHECK(cache.Commit(Meta("a")) == 1);
  CHECK(cache.Commit(broadcast) == (2 | kEveryRankCacheIdBit));
  CHECK(cache.Commit(reducescatter) == (3 | kEveryRankCacheIdBit));
  CHECK(cache.Commit(Meta("c")) == 4);  // one count for both kinds: ids stay unique
  CHECK_FALSE(NeedsEveryRank(cache.IdOf("c")));
  CHECK(NeedsEveryRank(cache.IdOf("b")));
  REQUIRE(cache.Lookup(2 | kEveryRankCacheIdBit) != nullptr);
  CHECK(cache.Lookup(2 | kEveryRankCacheIdBit)->meta == broadcast);
  CHECK(cache.Lookup(2) == nullptr);
  // A process set's allreduce too: a rank that joined the job stands in for the job's
  // allreduces only (a set's join is the set's own), and every rank outside the set reports
  // the id ready for the fast path's rounds.
  TensorMeta in_set = Meta("s [process set 1]");
  in_set.process_set = 1;
  CHECK(cache.Commit(in_set) == (5 | kEveryRankCacheIdBit));
  // A grouped allreduce of the job (protocol 8) and a barrier: the fast path of a joined rank
  // never stands in for a group, whose cut it may not know.
  TensorMeta grouped = Meta("g/a");
  grouped.group = "g/a,g/b";
  grouped.group_size = 2;
  CHECK(cache.Commit(grouped) == (6 | kEveryRankCacheIdBit));
  TensorMeta barrier = Meta("kolo.barrier", {0});
  barrier.op = OpType::kBarrier;
  CHECK(cache.Commit(barrier) == (7 | kEveryRankCacheIdBit));
  CHECK(cache.Commit(barrier) == (7 | kEveryRankCacheIdBit));  // a repeated barrier keeps it
}

TEST_CASE("An allgather's id stands for every rank's dimension 0", "[controller][cache]") {
  ResponseCache cache(8);
  TensorMeta gather = Meta("g", {3, 5});  // rank 0's: 3 rows of 5
  gather.op = OpType::kAllgather;
  const uint32_t id = cache.Commit(gather, {3, 0, 7});
  CHECK(id == (1 | kEveryRankCacheIdBit));
  CHECK(cache.Commit(gather, {3, 0, 7}) == id);
  const ResponseCache::Cached* cached = cache.Lookup(id);
  REQUIRE(cached != nullptr);
  CHECK(cached->first_dims == std::vector<int64_t>{3, 0, 7});
  CHECK(cached->MetaOf(0).shape == std::vector<int64_t>{3, 5});
  CHECK(cached->MetaOf(1).shape == std::vector<int64_t>{0, 5});
  CHECK(cached->MetaOf(2).shape == std::vector<int64_t>{7, 5});
  // Another rank's rows changed, rank 0's did not: a fresh id all the same.
  const uint32_t changed = cache.Commit(gather, {3, 1, 7});
  CHECK(changed == (2 | kEveryRankCacheIdBit));
  CHECK(cache.Lookup(id) == nullptr);
  CHECK(cache.size() == 1);
}

TEST_CASE("An alltoall's id stands for the split matrix", "[controller][cache]") {
  ResponseCache cache(8);
  TensorMeta a2a = Meta("a", {3, 4});  // rank 0's: 1 row to itself, 2 to rank 1
  a2a.op = OpType::kAlltoall;
  a2a.splits = {1, 2};
  const std::vector<int64_t> matrix = {1, 2, 0, 5};  // rank 1: 0 rows to rank 0, 5 to itself
  const uint32_t id = cache.Commit(a2a, {}, matrix);
  CHECK(id == (1 | kEveryRankCacheIdBit));
  CHECK(cache.Commit(a2a, {}, matrix) == id);
  const ResponseCache::Cached* cached = cache.Lookup(id);
  REQUIRE(cached != nullptr);
  CHECK(cached->ranks() == 2);
  CHECK(cached->MetaOf(0).splits == std::vector<int64_t>{1, 2});
  CHECK(cached->MetaOf(0).shape == std::vector<int64_t>{3, 4});
  CHECK(cached->MetaOf(1).splits == std::vector<int64_t>{0, 5});
  CHECK(cached->MetaOf(1).shape == std::vector<int64_t>{5, 4});
  // Rank 1's splits changed, rank 0's did not: no id (the old one is retired) until the same
  // splits come twice in a row, as a router's that change every step never do.
  CHECK(cache.Commit(a2a, {}, {1, 2, 1, 4}) == 0);
  CHECK(cache.Lookup(id) == nullptr);
  CHECK(cache.IdOf("a") == 0);
  CHECK(cache.Commit(a2a, {}, {1, 2, 2, 3}) == 0);
  CHECK(cache.Commit(a2a, {}, {1, 2, 2, 3}) == (2 | kEveryRankCacheIdBit));
  CHECK(cache.Commit(a2a, {}, {1, 2, 2, 3}) == (2 | kEveryRankCacheIdBit));
  CHECK(cache.size() == 1);
}

}  // namespace
}  // namespace kolo::controller
