// Tests of the ring allreduce's pure schedule (ops/ring_allreduce.h): chunk ranges and the
// per-rank step list, including a lock-step simulation of the whole ring that tracks which
// ranks' contributions every chunk of every rank holds.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "ops/ring_allreduce.h"

namespace kolo::ops {
namespace {

TEST_CASE("chunk ranges cover the buffer exactly with sizes differing by at most one",
          "[ops][ring]") {
  const int n = GENERATE(range(1, 17));
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{13}, size_t{100},
                                size_t{1031}, size_t{1} << 20);
  size_t next = 0;
  size_t smallest = count;
  size_t largest = 0;
  for (int c = 0; c < n; ++c) {
    const ElementRange range = ChunkRange(count, n, c);
    REQUIRE(range.begin == next);
    next += range.count;
    smallest = std::min(smallest, range.count);
    largest = std::max(largest, range.count);
  }
  CHECK(next == count);
  CHECK(largest - smallest <= 1);
  if (count < static_cast<size_t>(n)) {
    CHECK(largest <= 1);
    CHECK(ChunkRange(count, n, n - 1).count == 0);
  }
}

TEST_CASE("a ring of one rank has no steps", "[ops][ring]") {
  CHECK(RingSchedule(0, 1).empty());
}

TEST_CASE("each ring step sends the chunk the previous step received", "[ops][ring]") {
  const int n = GENERATE(range(2, 9));
  for (int rank = 0; rank < n; ++rank) {
    const std::vector<RingSegment> schedule = RingSchedule(rank, n);
    REQUIRE(schedule.size() == 2 * static_cast<size_t>(n - 1));
    CHECK(schedule[0].send_chunk == rank);
    for (size_t k = 0; k < schedule.size(); ++k) {
      CHECK(schedule[k].reduce == (k < static_cast<size_t>(n - 1)));
      CHECK(schedule[k].send_chunk != schedule[k].recv_chunk);
      if (k > 0) CHECK(schedule[k].send_chunk == schedule[k - 1].recv_chunk);
    }
  }
}

TEST_CASE("each rank receives what its left neighbour sends at every step", "[ops][ring]") {
  const int n = GENERATE(range(2, 9));
  for (int rank = 0; rank < n; ++rank) {
    const auto mine = RingSchedule(rank, n);
    const auto left = RingSchedule((rank - 1 + n) % n, n);
    for (size_t k = 0; k < mine.size(); ++k) CHECK(mine[k].recv_chunk == left[k].send_chunk);
  }
}

// Runs the schedules of all n ranks in lock step over bitsets of contributing ranks.
TEST_CASE("the ring leaves every rank with every chunk fully reduced", "[ops][ring]") {
  const int n = GENERATE(range(1, 9));
  const uint32_t everyone = (1u << n) - 1;
  // contributions[rank][chunk]: the ranks whose input that chunk of that rank includes.
  std::vector<std::vector<uint32_t>> contributions(n, std::vector<uint32_t>(n));
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) contributions[r][c] = 1u << r;
  }
  std::vector<std::vector<RingSegment>> schedules;
  for (int r = 0; r < n; ++r) schedules.push_back(RingSchedule(r, n));
  const size_t steps = n > 1 ? 2 * static_cast<size_t>(n - 1) : 0;
  for (size_t k = 0; k < steps; ++k) {
    std::vector<uint32_t> sent(n);
    for (int r = 0; r < n; ++r) sent[r] = contributions[r][schedules[r][k].send_chunk];
    for (int r = 0; r < n; ++r) {
      const RingSegment& step = schedules[r][k];
      const uint32_t incoming = sent[(r - 1 + n) % n];
      uint32_t& chunk = contributions[r][step.recv_chunk];
      if (step.reduce) {
        REQUIRE((chunk & incoming) == 0);  // nobody's input is counted twice
        chunk |= incoming;
      } else {
        REQUIRE(incoming == everyone);  // the allgather only forwards finished chunks
        chunk = incoming;
      }
    }
    if (k + 2 == static_cast<size_t>(n)) {  // end of scatter-reduce: r owns chunk r+1
      for (int r = 0; r < n; ++r) CHECK(contributions[r][(r + 1) % n] == everyone);
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) CHECK(contributions[r][c] == everyone);
  }
}

}  // namespace
}  // namespace kolo::ops
