// Tests of ops/segmented_buffer.h: logical offsets mapped onto pieces, and slices of the
// logical buffer that cross piece boundaries.
#include "ops/segmented_buffer.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace kolo::ops {
namespace {

// Every logical byte of `buffer` in order, read through Locate().
std::vector<uint8_t> Bytes(const SegmentedBuffer& buffer) {
  std::vector<uint8_t> bytes;
  for (size_t offset = 0; offset < buffer.total(); ++offset) {
    bytes.push_back(*buffer.Locate(offset).data);
  }
  return bytes;
}

TEST_CASE("a segmented buffer skips empty pieces and locates every logical byte",
          "[ops][segmented_buffer]") {
  uint8_t a[3] = {0, 1, 2};
  uint8_t b[4] = {3, 4, 5, 6};
  const SegmentedBuffer buffer({{a, 3}, {b, 0}, {b, 4}});
  CHECK(buffer.total() == 7);
  CHECK(Bytes(buffer) == std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6});
  const SegmentedBuffer::Span span = buffer.Locate(1);
  CHECK(span.data == a + 1);
  CHECK(span.bytes == 2);  // runs to the end of its piece only
  CHECK(buffer.Locate(3).data == b);
}

TEST_CASE("a slice of a segmented buffer is the same memory over the given logical range",
          "[ops][segmented_buffer]") {
  uint8_t a[3] = {0, 1, 2};
  uint8_t b[2] = {3, 4};
  uint8_t c[4] = {5, 6, 7, 8};
  const SegmentedBuffer buffer({{a, 3}, {b, 2}, {c, 4}});

  const SegmentedBuffer across = buffer.Slice(2, 5);  // the end of a, all of b, the start of c
  CHECK(across.total() == 5);
  CHECK(Bytes(across) == std::vector<uint8_t>{2, 3, 4, 5, 6});
  CHECK(across.Locate(0).data == a + 2);
  CHECK(across.Locate(0).bytes == 1);
  CHECK(across.Locate(3).data == c);
  CHECK(across.Locate(3).bytes == 2);  // cut at the slice's end, not at c's

  const SegmentedBuffer inside = buffer.Slice(6, 2);
  CHECK(Bytes(inside) == std::vector<uint8_t>{6, 7});
  CHECK(inside.Locate(0).data == c + 1);
  CHECK(inside.Locate(0).bytes == 2);

  CHECK(Bytes(buffer.Slice(0, buffer.total())) == Bytes(buffer));
  CHECK(buffer.Slice(4, 0).total() == 0);

  *across.Locate(1).data = 40;  // writes land in the original memory
  CHECK(b[0] == 40);
}

}  // namespace
}  // namespace kolo::ops
