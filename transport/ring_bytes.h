// The byte copies of kolo's single-producer single-consumer rings in shared memory: the fast
// path's round rings (transport/shm/shm_round_ring.h) and point-to-point's
// (transport/p2p/p2p_ring.h). A ring of `capacity` bytes (a power of two) holds each byte of the
// stream at its position modulo the capacity, so a copy may wrap once. Pure functions: the
// callers check the room and order the head and tail stores.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kolo::transport {

// Copies `n` bytes from `from` into `ring` at stream position `position`.
inline void CopyIntoRing(uint8_t* ring, size_t capacity, uint64_t position, const void* from,
                         size_t n) {
  const size_t at = position & (capacity - 1);
  const size_t first = std::min(n, capacity - at);
  std::memcpy(ring + at, from, first);
  if (n > first) std::memcpy(ring, static_cast<const uint8_t*>(from) + first, n - first);
}

// Copies `n` bytes out of `ring` from stream position `position` to `to`.
inline void CopyOutOfRing(const uint8_t* ring, size_t capacity, uint64_t position, void* to,
                          size_t n) {
  const size_t at = position & (capacity - 1);
  const size_t first = std::min(n, capacity - at);
  std::memcpy(to, ring + at, first);
  if (n > first) std::memcpy(static_cast<uint8_t*>(to) + first, ring, n - first);
}

}  // namespace kolo::transport
