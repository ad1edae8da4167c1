#include "ops/shm_reducescatter.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops/reduce_kernels.h"

namespace kolo::ops {
namespace {

// This rank's `todo` elements of a round reduced over the ranks, in rank order, into `result`:
// `values[r]` is rank r's (this rank's own input, or rank r's slot). In place (`result` is this
// rank's own values) the ranks before it are folded first, into `earlier` (a piece of this
// rank's slot that no rank reads) when there are several, and joined as `earlier (op) own`:
// the same order, and ReduceInto may not write an operand.
void ReduceRanks(const std::vector<const uint8_t*>& values, int me, uint8_t* result,
                 uint8_t* earlier, size_t todo, DataType dtype, ReduceOp op) {
  const int n = static_cast<int>(values.size());
  if (n == 1) {
    if (result != values[0]) std::memmove(result, values[0], todo * DataTypeSize(dtype));
    return;
  }
  if (result == values[me]) {
    if (me == 1) {
      ReduceReversed(result, values[0], todo, dtype, op);
    } else if (me >= 2) {
      ReduceInto(earlier, values[0], values[1], todo, dtype, op);
      for (int r = 2; r < me; ++r) Reduce(earlier, values[r], todo, dtype, op);
      ReduceReversed(result, earlier, todo, dtype, op);
    }
    for (int r = me + 1; r < n; ++r) Reduce(result, values[r], todo, dtype, op);
    return;
  }
  ReduceInto(result, values[0], values[1], todo, dtype, op);
  for (int r = 2; r < n; ++r) Reduce(result, values[r], todo, dtype, op);
}

}  // namespace

Status ShmReducescatter(SharedMemoryPlane& plane, const void* input, void* output,
                        const std::vector<size_t>& block_elements, DataType dtype, ReduceOp op,
                        const std::string& what) {
  const int n = plane.size();
  const int me = plane.rank();
  const size_t element = DataTypeSize(dtype);
  if (static_cast<int>(block_elements.size()) != n || element == 0) {
    return Internal(what + ": " + std::to_string(block_elements.size()) + " blocks of " +
                    DataTypeName(dtype) + " for " + std::to_string(n) + " ranks");
  }
  const uint8_t* in = static_cast<const uint8_t*>(input);
  uint8_t* out = static_cast<uint8_t*>(output);
  std::vector<size_t> offsets(static_cast<size_t>(n), 0);  // of each block, in bytes
  for (int r = 1; r < n; ++r) offsets[r] = offsets[r - 1] + block_elements[r - 1] * element;
  // Elements of each block a round carries: a slot holds one piece for every rank.
  const size_t piece = plane.slot_bytes() / static_cast<size_t>(n) / element;
  if (piece == 0) {
    return Internal(what + ": slots of " + std::to_string(plane.slot_bytes()) +
                    " bytes are too small for " + std::to_string(n) + " ranks of " +
                    DataTypeName(dtype));
  }
  const size_t longest = *std::max_element(block_elements.begin(), block_elements.end());
  std::vector<const uint8_t*> values(static_cast<size_t>(n));
  for (size_t at = 0; at < longest; at += piece) {
    const int set = plane.NextSlotSet();
    // Elements [at, at + count(r)) of block r go this round.
    auto count = [&](int r) {
      return std::min(piece, block_elements[r] - std::min(at, block_elements[r]));
    };
    uint8_t* mine = plane.slot(set, me);
    for (int r = 0; r < n; ++r) {
      if (r != me && count(r) > 0) {
        std::memcpy(mine + static_cast<size_t>(r) * piece * element, in + offsets[r] + at * element,
                    count(r) * element);
      }
    }
    KOLO_RETURN_IF_ERROR(plane.Sync(what));
    const size_t todo = count(me);
    if (todo == 0) continue;
    // Rank r's values of this rank's piece: its own input, or rank r's slot.
    for (int r = 0; r < n; ++r) {
      values[r] = r == me ? in + offsets[me] + at * element
                          : plane.slot(set, r) + static_cast<size_t>(me) * piece * element;
    }
    ReduceRanks(values, me, out + at * element, mine + static_cast<size_t>(me) * piece * element,
                todo, dtype, op);
  }
  return Status::Ok();
}

}  // namespace kolo::ops
