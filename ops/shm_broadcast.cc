#include "ops/shm_broadcast.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kolo::ops {

Status ShmBroadcast(SharedMemoryPlane& plane, void* buffer, size_t bytes, int root,
                    const std::string& what) {
  uint8_t* data = static_cast<uint8_t*>(buffer);
  const bool is_root = plane.rank() == root;
  for (size_t offset = 0; offset < bytes; offset += plane.slot_bytes()) {
    const size_t n = std::min(plane.slot_bytes(), bytes - offset);
    uint8_t* slot = plane.slot(plane.NextSlotSet(), root);
    if (is_root) std::memcpy(slot, data + offset, n);
    KOLO_RETURN_IF_ERROR(plane.Sync(what));
    if (!is_root) std::memcpy(data + offset, slot, n);
  }
  return Status::Ok();
}

}  // namespace kolo::ops
