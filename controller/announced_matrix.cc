#include "controller/announced_matrix.h"

#include <algorithm>

namespace kolo::controller {

uint32_t AnnouncedMatrix::Open() {
  uint32_t slot = 0;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    if (used_ == capacity_) Grow();
    slot = used_++;
  }
  if (generation_[slot] == UINT8_MAX) {
    // The marks of 255 generations ago would read as this one's: clear the column.
    for (int rank = 0; rank < size_; ++rank) stamps_[Index(rank, slot)] = 0;
    generation_[slot] = 0;
  }
  ++generation_[slot];
  count_[slot] = 0;
  return slot;
}

void AnnouncedMatrix::Grow() {
  const uint32_t capacity = std::max<uint32_t>(16, capacity_ * 2);
  std::vector<uint8_t> stamps(static_cast<size_t>(size_) * capacity, 0);
  for (int rank = 0; rank < size_; ++rank) {
    std::copy_n(stamps_.begin() + static_cast<ptrdiff_t>(Index(rank, 0)), capacity_,
                stamps.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(rank) * capacity));
  }
  stamps_.swap(stamps);
  capacity_ = capacity;
  generation_.resize(capacity, 0);  // 0: never open, so no stamp (all 0) reads as marked once open
  count_.resize(capacity, 0);
}

}  // namespace kolo::controller
