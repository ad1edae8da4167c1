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
  CHECK(*cache.Lookup(2) == Meta("b"));
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
  CHECK(cache.Lookup(2)->shape == std::vector<int64_t>{8});
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

}  // namespace
}  // namespace kolo::controller
