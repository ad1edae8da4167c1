// Unit tests of the benchmarks' summary statistics (kolo_bench_lib).
#include "tools/bench/bench_stats.h"

#include <catch2/catch.hpp>

namespace kolo::bench {
namespace {

TEST_CASE("Median takes the middle sample, or the mean of the middle two", "[tools][bench]") {
  CHECK(Median({}) == 0);
  CHECK(Median({7}) == 7);
  CHECK(Median({9, 1, 5}) == 5);
  CHECK(Median({4, 1, 3, 2}) == 2.5);  // unsorted, even count
  CHECK(Median({2, 2, 100, 2}) == 2);  // an outlier does not move it
}

}  // namespace
}  // namespace kolo::bench
