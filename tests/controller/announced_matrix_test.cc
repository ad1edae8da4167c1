// Unit tests of controller/announced_matrix: marks and counts per slot, kept across growth,
// and never read back by a later occupant of the slot, however often it is reused.
#include "controller/announced_matrix.h"

#include <catch2/catch.hpp>
#include <vector>

namespace kolo::controller {
namespace {

TEST_CASE("Marks count per slot and survive the rows' growth", "[controller][announced]") {
  constexpr int kSize = 5;
  AnnouncedMatrix matrix(kSize);
  std::vector<uint32_t> slots;
  for (int i = 0; i < 40; ++i) {  // past the first capacity (16) and the second (32)
    slots.push_back(matrix.Open());
    const uint32_t slot = slots.back();
    for (int rank = 0; rank < kSize; rank += 2) CHECK(matrix.Mark(rank, slot) == rank / 2 + 1);
  }
  for (uint32_t slot : slots) {
    for (int rank = 0; rank < kSize; ++rank) CHECK(matrix.Has(rank, slot) == (rank % 2 == 0));
    CHECK(matrix.count(slot) == 3);
  }
}

TEST_CASE("A reused slot starts with no rank marked, through the generation's wrap",
          "[controller][announced]") {
  constexpr int kSize = 3;
  AnnouncedMatrix matrix(kSize);
  const uint32_t other = matrix.Open();
  matrix.Mark(1, other);
  for (int use = 0; use < 600; ++use) {  // 255 generations a slot: wraps twice
    const uint32_t slot = matrix.Open();
    CHECK(slot != other);
    for (int rank = 0; rank < kSize; ++rank) CHECK_FALSE(matrix.Has(rank, slot));
    CHECK(matrix.count(slot) == 0);
    // Ranks 0 and 1 only in the first generation: their marks would read as marked again
    // once the generation comes round, unless the wrap clears them.
    if (use == 0) {
      matrix.Mark(0, slot);
      CHECK(matrix.Mark(1, slot) == 2);
    } else {
      CHECK(matrix.Mark(2, slot) == 1);
    }
    matrix.Close(slot);
  }
  CHECK(matrix.Has(1, other));  // untouched by its neighbour's reuse
  CHECK(matrix.count(other) == 1);
}

}  // namespace
}  // namespace kolo::controller
