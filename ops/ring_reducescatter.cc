#include "ops/ring_reducescatter.h"

#include "core/op_validation.h"
#include "ops/ring_exchange.h"

namespace kolo::ops {

std::vector<RingSegment> ReducescatterSchedule(int rank, int n) {
  std::vector<RingSegment> steps;
  for (int s = 0; s < n - 1; ++s) {
    RingSegment step;
    step.send_chunk = ((rank - s - 1) % n + n) % n;
    step.recv_chunk = ((rank - s - 2) % n + n) % n;
    step.reduce = true;
    steps.push_back(step);
  }
  return steps;
}

Status RingReducescatter(DataPlane& plane, void* buffer, int64_t rows, int64_t row_elements,
                         DataType dtype, ReduceOp op, RingScratch& scratch,
                         const std::string& what) {
  std::vector<size_t> blocks;
  for (int64_t part : SplitRows(rows, plane.size())) {
    blocks.push_back(static_cast<size_t>(part * row_elements));
  }
  return RingReducescatterBlocks(plane, buffer, blocks, dtype, op, scratch, what);
}

Status RingReducescatterBlocks(DataPlane& plane, void* buffer,
                               const std::vector<size_t>& block_elements, DataType dtype,
                               ReduceOp op, RingScratch& scratch, const std::string& what) {
  const int n = plane.size();
  if (static_cast<int>(block_elements.size()) != n) {
    return Internal(what + ": " + std::to_string(block_elements.size()) + " blocks for " +
                    std::to_string(n) + " ranks");
  }
  std::vector<ElementRange> chunks;
  size_t begin = 0;
  for (size_t count : block_elements) {
    chunks.push_back(ElementRange{begin, count});
    begin += count;
  }
  if (n == 1 || begin == 0) return Status::Ok();
  const int r = plane.rank();
  RingExchange exchange(buffer, chunks, ReducescatterSchedule(r, n), dtype, op, scratch);
  return plane.Exchange((r + 1) % n, (r - 1 + n) % n, exchange, what);
}

}  // namespace kolo::ops
