#include "ops/shm_allgather.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kolo::ops {

Status ShmAllgatherBlocks(SharedMemoryPlane& plane, void* buffer,
                          const std::vector<size_t>& block_bytes, const std::string& what) {
  const int n = plane.size();
  if (static_cast<int>(block_bytes.size()) != n) {
    return Internal(what + ": " + std::to_string(block_bytes.size()) + " blocks for " +
                    std::to_string(n) + " ranks");
  }
  uint8_t* data = static_cast<uint8_t*>(buffer);
  std::vector<size_t> offsets(static_cast<size_t>(n), 0);
  for (int r = 1; r < n; ++r) offsets[r] = offsets[r - 1] + block_bytes[r - 1];
  const size_t longest = *std::max_element(block_bytes.begin(), block_bytes.end());
  const int me = plane.rank();
  for (size_t at = 0; at < longest; at += plane.slot_bytes()) {
    const int set = plane.NextSlotSet();
    // This piece of rank r's block: [at, at + Piece(r)).
    auto piece = [&](int r) {
      return std::min(plane.slot_bytes(), block_bytes[r] - std::min(at, block_bytes[r]));
    };
    if (piece(me) > 0) std::memcpy(plane.slot(set, me), data + offsets[me] + at, piece(me));
    KOLO_RETURN_IF_ERROR(plane.Sync(what));
    for (int r = 0; r < n; ++r) {
      if (r != me && piece(r) > 0)
        std::memcpy(data + offsets[r] + at, plane.slot(set, r), piece(r));
    }
  }
  return Status::Ok();
}

}  // namespace kolo::ops
