#include "ops/shm_allgather.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kolo::ops {
namespace {

// The bytes [at, at + n) of a share (its blocks back to back), copied out of or into `slot`.
// Returns how many there were (fewer than n at the share's end).
enum class Direction { kIntoSlot, kOutOfSlot };
size_t CopyShare(const std::vector<BlockAt>& share, uint8_t* buffer, size_t at, size_t n,
                 uint8_t* slot, Direction direction) {
  size_t copied = 0;
  size_t start = 0;  // the share's offset of the current block
  for (const BlockAt& block : share) {
    if (copied == n) break;
    const size_t end = start + block.bytes;
    if (at + copied < end) {
      const size_t into = at + copied - start;
      const size_t take = std::min(n - copied, block.bytes - into);
      uint8_t* memory = buffer + block.offset + into;
      if (direction == Direction::kIntoSlot) {
        std::memcpy(slot + copied, memory, take);
      } else {
        std::memcpy(memory, slot + copied, take);
      }
      copied += take;
    }
    start = end;
  }
  return copied;
}

size_t ShareBytes(const std::vector<BlockAt>& share) {
  size_t total = 0;
  for (const BlockAt& block : share) total += block.bytes;
  return total;
}

}  // namespace

Status ShmAllgatherBlocks(SharedMemoryPlane& plane, void* buffer,
                          const std::vector<size_t>& block_bytes, const std::string& what) {
  std::vector<std::vector<BlockAt>> shares(block_bytes.size());
  size_t offset = 0;
  for (size_t r = 0; r < block_bytes.size(); ++r) {
    shares[r].push_back(BlockAt{offset, block_bytes[r]});
    offset += block_bytes[r];
  }
  return ShmAllgatherShares(plane, buffer, shares, what);
}

Status ShmAllgatherShares(SharedMemoryPlane& plane, void* buffer,
                          const std::vector<std::vector<BlockAt>>& shares,
                          const std::string& what) {
  const int n = plane.size();
  if (static_cast<int>(shares.size()) != n) {
    return Internal(what + ": " + std::to_string(shares.size()) + " shares for " +
                    std::to_string(n) + " ranks");
  }
  uint8_t* data = static_cast<uint8_t*>(buffer);
  std::vector<size_t> totals(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) totals[r] = ShareBytes(shares[r]);
  const size_t longest = *std::max_element(totals.begin(), totals.end());
  const int me = plane.rank();
  const size_t chunk = plane.slot_bytes();
  for (size_t at = 0; at < longest; at += chunk) {
    const int set = plane.NextSlotSet();
    if (at < totals[me]) {
      CopyShare(shares[me], data, at, chunk, plane.slot(set, me), Direction::kIntoSlot);
    }
    KOLO_RETURN_IF_ERROR(plane.Sync(what));
    for (int r = 0; r < n; ++r) {
      if (r != me && at < totals[r]) {
        CopyShare(shares[r], data, at, chunk, plane.slot(set, r), Direction::kOutOfSlot);
      }
    }
  }
  return Status::Ok();
}

}  // namespace kolo::ops
