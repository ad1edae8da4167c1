// AnnouncedMatrix: which ranks announced each pending name of a ReadinessTable, and how many
// did. Each pending name holds a slot; the marks are stored rank by rank (a row of a byte per
// slot), so that one rank's batch of cached announcements touches a few cache lines of its own
// row rather than a line per name (docs/SCALE.md, "The protocol 7 server profiled"). A mark
// is the slot's generation at the time, so freeing a slot clears nothing: the next occupant
// has the next generation, and a slot's column is zeroed only when its generation wraps.
// Memory: a byte per rank per slot, the slots doubling to the most names pending at once (1,024
// ranks and 161 names: 256 KiB). Owned by the ReadinessTable; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kolo::controller {

class AnnouncedMatrix {
 public:
  explicit AnnouncedMatrix(int size) : size_(size) {}

  // A free slot, with no rank marked.
  uint32_t Open();
  // Frees `slot` for a later Open.
  void Close(uint32_t slot) { free_.push_back(slot); }
  // Whether `rank` is marked in open `slot`.
  bool Has(int rank, uint32_t slot) const {
    return stamps_[Index(rank, slot)] == generation_[slot];
  }
  // Marks `rank` (not marked yet) in open `slot`; returns how many ranks are marked now.
  int Mark(int rank, uint32_t slot) {
    stamps_[Index(rank, slot)] = generation_[slot];
    return ++count_[slot];
  }
  int count(uint32_t slot) const { return count_[slot]; }

 private:
  size_t Index(int rank, uint32_t slot) const {
    return static_cast<size_t>(rank) * capacity_ + slot;
  }
  // Doubles the slots every row holds.
  void Grow();

  const int size_;
  uint32_t capacity_ = 0;            // slots per row
  uint32_t used_ = 0;                // slots ever handed out (the rest of each row is unused)
  std::vector<uint8_t> stamps_;      // [rank * capacity_ + slot]: the generation it was marked in
  std::vector<uint8_t> generation_;  // by slot: its current occupant's, 1..255
  std::vector<int> count_;           // by slot: ranks marked
  std::vector<uint32_t> free_;       // closed slots, reused last closed first
};

}  // namespace kolo::controller
