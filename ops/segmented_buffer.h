// SegmentedBuffer: several byte ranges (the fused tensors' own memory) seen as one logical
// buffer, so that a ring runs over them in place instead of through a fusion buffer. Offsets
// are logical; Locate() maps one to memory and says how far that memory runs contiguously.
// Value type; not thread-safe (one exchange thread uses it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kolo::ops {

struct BytePiece {
  uint8_t* data = nullptr;
  size_t bytes = 0;
};

class SegmentedBuffer {
 public:
  SegmentedBuffer() = default;
  // One contiguous range: the common case, at no cost.
  SegmentedBuffer(void* data, size_t bytes)
      : SegmentedBuffer({{static_cast<uint8_t*>(data), bytes}}) {}
  explicit SegmentedBuffer(const std::vector<BytePiece>& pieces) {
    for (const BytePiece& piece : pieces) {
      if (piece.bytes == 0) continue;  // empty tensors take no room
      starts_.push_back(total_);
      pieces_.push_back(piece);
      total_ += piece.bytes;
    }
  }

  size_t total() const { return total_; }

  // Memory of logical byte `offset` (< total()) and the bytes that follow it contiguously.
  struct Span {
    uint8_t* data;
    size_t bytes;
  };
  Span Locate(size_t offset) const {
    // The last piece that starts at or before `offset`.
    const size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) -
                                         starts_.begin()) -
                     1;
    const size_t into = offset - starts_[i];
    return {pieces_[i].data + into, pieces_[i].bytes - into};
  }

  // The logical bytes [offset, offset + bytes) as a buffer of their own (offset + bytes <=
  // total()); it points into the same memory.
  SegmentedBuffer Slice(size_t offset, size_t bytes) const {
    std::vector<BytePiece> pieces;
    while (bytes > 0) {
      const Span span = Locate(offset);
      const size_t take = std::min(span.bytes, bytes);
      pieces.push_back({span.data, take});
      offset += take;
      bytes -= take;
    }
    return SegmentedBuffer(pieces);
  }

 private:
  std::vector<BytePiece> pieces_;  // non-empty, in logical order
  std::vector<size_t> starts_;     // logical offset of each piece
  size_t total_ = 0;
};

}  // namespace kolo::ops
