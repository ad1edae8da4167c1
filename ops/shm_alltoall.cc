#include "ops/shm_alltoall.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kolo::ops {

Status ShmAlltoall(SharedMemoryPlane& plane, const void* input, const std::vector<ByteBlock>& send,
                   void* output, const std::vector<ByteBlock>& recv,
                   const std::vector<size_t>& matrix_bytes, const std::string& what) {
  const size_t n = static_cast<size_t>(plane.size());
  const size_t me = static_cast<size_t>(plane.rank());
  if (send.size() != n || recv.size() != n || matrix_bytes.size() != n * n) {
    return Internal(what + ": " + std::to_string(send.size()) + " send blocks, " +
                    std::to_string(recv.size()) + " receive blocks and a matrix of " +
                    std::to_string(matrix_bytes.size()) + " for " + std::to_string(n) + " ranks");
  }
  const size_t part = plane.slot_bytes() / n / 64 * 64;  // each destination's part of a slot
  if (part == 0) {
    return Internal(what + ": a slot of " + std::to_string(plane.slot_bytes()) +
                    " bytes has no 64-byte part for each of " + std::to_string(n) + " ranks");
  }
  const uint8_t* in = static_cast<const uint8_t*>(input);
  uint8_t* out = static_cast<uint8_t*>(output);
  if (send[me].bytes > 0) std::memcpy(out + recv[me].offset, in + send[me].offset, send[me].bytes);
  size_t longest = 0;  // the largest block between two different ranks
  for (size_t s = 0; s < n; ++s) {
    for (size_t d = 0; d < n; ++d) {
      if (s != d) longest = std::max(longest, matrix_bytes[s * n + d]);
    }
  }
  for (size_t at = 0; at < longest; at += part) {
    const int set = plane.NextSlotSet();
    uint8_t* mine = plane.slot(set, static_cast<int>(me));
    for (size_t d = 0; d < n; ++d) {
      if (d == me || at >= send[d].bytes) continue;
      std::memcpy(mine + d * part, in + send[d].offset + at, std::min(part, send[d].bytes - at));
    }
    KOLO_RETURN_IF_ERROR(plane.Sync(what));
    for (size_t s = 0; s < n; ++s) {
      if (s == me || at >= recv[s].bytes) continue;
      const uint8_t* theirs = plane.slot(set, static_cast<int>(s)) + me * part;
      std::memcpy(out + recv[s].offset + at, theirs, std::min(part, recv[s].bytes - at));
    }
  }
  return Status::Ok();
}

}  // namespace kolo::ops
