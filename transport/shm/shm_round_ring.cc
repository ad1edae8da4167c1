#include "transport/shm/shm_round_ring.h"

#include <algorithm>
#include <string>

#include "transport/ring_bytes.h"

namespace kolo::transport {

static_assert((kShmRoundRingBytes & (kShmRoundRingBytes - 1)) == 0, "ring size: a power of two");

size_t ShmRoundArea::Bytes(int size) {
  const auto n = static_cast<size_t>(size);
  return n * sizeof(ShmRoundInbox) + n * n * sizeof(ShmRoundRing);
}

ShmRoundInbox* ShmRoundArea::inbox(int rank) const {
  return reinterpret_cast<ShmRoundInbox*>(base_) + rank;
}

ShmRoundRing* ShmRoundArea::ring(int from, int to) const {
  auto* rings = reinterpret_cast<ShmRoundRing*>(base_ + size_ * sizeof(ShmRoundInbox));
  return rings + static_cast<size_t>(from) * size_ + to;
}

size_t RingWrite(ShmRoundRing* ring, uint64_t* tail, const char* data, size_t n,
                 uint64_t* seen_head) {
  // The head only grows, so room counted from one seen before is room there is. The head's
  // line is the receiver's: reading it costs a transfer between the cores whenever it moved,
  // so it is read only when the room seen is too small.
  const bool room_seen = seen_head != nullptr && *tail - *seen_head <= kShmRoundRingBytes &&
                         kShmRoundRingBytes - static_cast<size_t>(*tail - *seen_head) >= n;
  const uint64_t head = room_seen ? *seen_head : __atomic_load_n(&ring->head, __ATOMIC_SEQ_CST);
  if (seen_head != nullptr) *seen_head = head;
  // A receiver that moved head past our tail broke the protocol; treat the ring as full
  // (the peer's messages still arrive, ours wait; its own checks report the damage).
  const uint64_t used = *tail - head;
  if (used > kShmRoundRingBytes) return 0;
  const size_t take = std::min(n, kShmRoundRingBytes - static_cast<size_t>(used));
  CopyIntoRing(ring->data, kShmRoundRingBytes, *tail, data, take);
  *tail += take;
  if (take > 0) __atomic_store_n(&ring->tail, *tail, __ATOMIC_SEQ_CST);
  return take;
}

StatusOr<size_t> RingRead(ShmRoundRing* ring, uint64_t* head, char* out, size_t capacity) {
  const uint64_t tail = __atomic_load_n(&ring->tail, __ATOMIC_SEQ_CST);
  const uint64_t available = tail - *head;
  if (available > kShmRoundRingBytes) {
    return Unavailable("shared-memory round ring holds " + std::to_string(available) +
                       " bytes, more than its " + std::to_string(kShmRoundRingBytes));
  }
  const size_t take = std::min(capacity, static_cast<size_t>(available));
  CopyOutOfRing(ring->data, kShmRoundRingBytes, *head, out, take);
  *head += take;
  if (take > 0) __atomic_store_n(&ring->head, *head, __ATOMIC_SEQ_CST);
  return take;
}

bool RingHasData(const ShmRoundRing* ring, uint64_t head) {
  return __atomic_load_n(&ring->tail, __ATOMIC_SEQ_CST) != head;
}

}  // namespace kolo::transport
