#include "ops/gpu_plane/rank_bytes.h"

#include "ops/ring_allgather.h"

namespace kolo {

StatusOr<std::vector<uint8_t>> AllgatherRankBytes(DataPlane& mesh, int rank, int size, uint8_t mine,
                                                  const std::string& what) {
  std::vector<uint8_t> bytes(static_cast<size_t>(size), 0);
  bytes[static_cast<size_t>(rank)] = mine;
  if (size > 1) {
    KOLO_RETURN_IF_ERROR(
        ops::RingAllgather(mesh, bytes.data(), std::vector<size_t>(bytes.size(), 1), what));
  }
  return bytes;
}

}  // namespace kolo
