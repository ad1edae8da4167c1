#include "ops/shm_single_copy.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "ops/reduce_kernels.h"

namespace kolo::ops {
namespace {

// A board (SharedMemoryPlane::board) as this algorithm lays it out: a header, then one entry per
// span, in span order. Written by its rank before the op's first sync, read by every rank after
// it; rewritten only in the next op, after the last sync of this one.
struct BoardHeader {
  uint64_t spans;               // entries that follow
  uint64_t total;               // elements of all spans
  uint64_t overlap;             // 1: some of this rank's tensors overlap one another
  uint64_t out_of_place_bytes;  // of this rank's tensors whose output is not their input
};
struct BoardEntry {
  uint64_t input;   // address in the rank's process
  uint64_t output;  // the same as input in place
  uint64_t count;   // elements
};

size_t BoardCapacity(size_t board_bytes) {
  return board_bytes < sizeof(BoardHeader)
             ? 0
             : (board_bytes - sizeof(BoardHeader)) / sizeof(BoardEntry);
}

BoardHeader ReadHeader(const uint8_t* board) {
  BoardHeader header;
  std::memcpy(&header, board, sizeof(header));
  return header;
}

BoardEntry ReadEntry(const uint8_t* board, size_t i) {
  BoardEntry entry;
  std::memcpy(&entry, board + sizeof(BoardHeader) + i * sizeof(BoardEntry), sizeof(entry));
  return entry;
}

}  // namespace

ShmSingleCopy::ShmSingleCopy(SharedMemoryPlane& plane, const Tuning& tuning)
    : plane_(plane), tuning_(tuning) {
  KOLO_CHECK(tuning.piece_bytes > 0 && tuning.piece_bytes % 64 == 0)
      << "ShmSingleCopy: piece_bytes " << tuning.piece_bytes << " is not a positive multiple of 64";
}

bool ShmSingleCopy::Fits(const std::vector<ReduceSpan>& spans, DataType dtype) const {
  const size_t bytes = TotalCount(spans) * DataTypeSize(dtype);
  return plane_.single_copy() && plane_.size() > 1 && bytes >= tuning_.min_bytes &&
         bytes <= plane_.single_copy_max_bytes() &&
         spans.size() <= BoardCapacity(plane_.board_bytes());
}

StatusOr<bool> ShmSingleCopy::Run(const std::vector<ReduceSpan>& spans, DataType dtype, ReduceOp op,
                                  const ReduceScaling& scaling, const std::string& what) {
  const size_t element_size = DataTypeSize(dtype);
  const size_t total = TotalCount(spans);
  result_.Reserve(tuning_.piece_bytes);
  values_.Reserve(tuning_.piece_bytes);
  gather_.Reserve(tuning_.piece_bytes);
  Publish(spans, element_size);
  cursors_.assign(plane_.size(), Cursor{});
  KOLO_RETURN_IF_ERROR(plane_.Sync(what));
  KOLO_ASSIGN_OR_RETURN(const bool usable, CheckBoards(total, what));
  if (!usable) return false;
  const auto [lo, hi] = RankSlice(total, plane_.size(), plane_.rank(), element_size);
  const size_t piece = tuning_.piece_bytes / element_size;
  for (size_t begin = lo; begin < hi; begin += piece) {
    KOLO_RETURN_IF_ERROR(
        ReducePiece(spans, begin, std::min(piece, hi - begin), dtype, op, scaling, what));
  }
  // Every rank's results are in every output, and nobody touches a peer's memory any more.
  KOLO_RETURN_IF_ERROR(plane_.Sync(what));
  return true;
}

bool ShmSingleCopy::Overlaps(const std::vector<ReduceSpan>& spans, size_t element_size) {
  extents_.clear();
  for (const ReduceSpan& span : spans) {
    const size_t bytes = span.count * element_size;
    if (bytes == 0) continue;
    const auto out = reinterpret_cast<uintptr_t>(span.output);
    extents_.push_back({out, out + bytes, true});
    if (span.input != span.output) {
      const auto in = reinterpret_cast<uintptr_t>(span.input);
      extents_.push_back({in, in + bytes, false});
    }
  }
  std::sort(extents_.begin(), extents_.end(),
            [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  uintptr_t output_end = 0;  // end of the outputs seen so far
  uintptr_t any_end = 0;     // end of every extent seen so far
  for (const Extent& extent : extents_) {
    if (extent.begin < output_end || (extent.output && extent.begin < any_end)) return true;
    any_end = std::max(any_end, extent.end);
    if (extent.output) output_end = std::max(output_end, extent.end);
  }
  return false;
}

void ShmSingleCopy::Publish(const std::vector<ReduceSpan>& spans, size_t element_size) {
  uint8_t* board = plane_.board(plane_.rank());
  uint64_t out_of_place = 0;
  for (const ReduceSpan& span : spans) {
    if (span.input != span.output) out_of_place += span.count * element_size;
  }
  const BoardHeader header{spans.size(), TotalCount(spans),
                           Overlaps(spans, element_size) ? uint64_t{1} : 0, out_of_place};
  std::memcpy(board, &header, sizeof(header));
  for (size_t i = 0; i < spans.size(); ++i) {
    const BoardEntry entry{reinterpret_cast<uint64_t>(spans[i].input),
                           reinterpret_cast<uint64_t>(spans[i].output), spans[i].count};
    std::memcpy(board + sizeof(BoardHeader) + i * sizeof(BoardEntry), &entry, sizeof(entry));
  }
}

StatusOr<bool> ShmSingleCopy::CheckBoards(size_t total, const std::string& what) const {
  bool usable = true;
  for (int r = 0; r < plane_.size(); ++r) {
    const BoardHeader header = ReadHeader(plane_.board(r));
    if (header.total != total || header.spans > BoardCapacity(plane_.board_bytes())) {
      return Internal(what + ": rank " + std::to_string(r) + " published " +
                      std::to_string(header.total) + " elements in " +
                      std::to_string(header.spans) + " tensors for its single copy, this rank " +
                      std::to_string(total));
    }
    if (header.overlap != 0 || header.out_of_place_bytes > tuning_.max_out_of_place_bytes) {
      usable = false;
    }
  }
  return usable;
}

Status ShmSingleCopy::ReducePiece(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                                  DataType dtype, ReduceOp op, const ReduceScaling& scaling,
                                  const std::string& what) {
  const int me = plane_.rank();
  const double prescale = scaling.prescale;
  const size_t element_size = DataTypeSize(dtype);
  uint8_t* values = values_.data();
  const uint8_t* own = OwnValues(spans, begin, count, dtype, prescale, gather_.data());
  // The result is reduced straight in this rank's output where the piece lies in one tensor
  // (saving a copy of it), else in result_ and copied out. Only this rank reads or writes its
  // output's elements of its own slice, and its own values are read once, at their turn.
  uint8_t* output = WholeOutput(spans, begin, count, element_size);
  uint8_t* result = output != nullptr ? output : result_.data();
  const bool on_own = result == own;  // in place, with no prescale
  // Every rank's values in rank order, 0 first. Ranks before this one into `early` (not the
  // output while it still holds this rank's values), then this rank's, then the rest.
  uint8_t* early = on_own ? result_.data() : result;
  if (me == 0) {
    KOLO_RETURN_IF_ERROR(ReadValues(1, begin, count, dtype, prescale, values, what));
    if (on_own) {
      Reduce(result, values, count, dtype, op);
    } else {
      ReduceInto(result, own, values, count, dtype, op);
    }
  } else {
    KOLO_RETURN_IF_ERROR(ReadValues(0, begin, count, dtype, prescale, early, what));
    for (int r = 1; r < me; ++r) {
      KOLO_RETURN_IF_ERROR(ReadValues(r, begin, count, dtype, prescale, values, what));
      Reduce(early, values, count, dtype, op);
    }
    if (on_own) {
      ReduceReversed(result, early, count, dtype, op);  // early (op) own, landing on own
    } else {
      Reduce(result, own, count, dtype, op);
    }
  }
  for (int r = std::max(2, me + 1); r < plane_.size(); ++r) {
    KOLO_RETURN_IF_ERROR(ReadValues(r, begin, count, dtype, prescale, values, what));
    Reduce(result, values, count, dtype, op);
  }
  ScaleResult(result, count, dtype, scaling);
  if (output == nullptr) {
    // This rank's outputs last read its inputs above (in place they are the same memory).
    ForEachSpanPiece(spans, begin, count,
                     [&](const ReduceSpan& span, size_t at, size_t to, size_t n) {
                       std::memcpy(static_cast<uint8_t*>(span.output) + at * element_size,
                                   result + to * element_size, n * element_size);
                     });
  }
  for (int r = 0; r < plane_.size(); ++r) {
    if (r == me) continue;
    PeerRanges(r, begin, count, element_size, /*outputs=*/true);
    KOLO_RETURN_IF_ERROR(plane_.WritePeer(r, result, ranges_, what));
  }
  return Status::Ok();
}

Status ShmSingleCopy::ReadValues(int peer, size_t begin, size_t count, DataType dtype,
                                 double prescale, uint8_t* into, const std::string& what) {
  PeerRanges(peer, begin, count, DataTypeSize(dtype), /*outputs=*/false);
  KOLO_RETURN_IF_ERROR(plane_.ReadPeer(peer, ranges_, into, what));
  if (prescale != 1.0) ScaleCopy(into, into, count, dtype, prescale);
  return Status::Ok();
}

uint8_t* ShmSingleCopy::WholeOutput(const std::vector<ReduceSpan>& spans, size_t begin,
                                    size_t count, size_t element_size) const {
  uint8_t* output = nullptr;
  ForEachSpanPiece(spans, begin, count, [&](const ReduceSpan& span, size_t at, size_t, size_t n) {
    if (n == count) output = static_cast<uint8_t*>(span.output) + at * element_size;
  });
  return output;
}

const uint8_t* ShmSingleCopy::OwnValues(const std::vector<ReduceSpan>& spans, size_t begin,
                                        size_t count, DataType dtype, double prescale,
                                        uint8_t* gather) const {
  const size_t element_size = DataTypeSize(dtype);
  const uint8_t* direct = nullptr;
  if (prescale == 1.0) {
    ForEachSpanPiece(spans, begin, count, [&](const ReduceSpan& span, size_t at, size_t, size_t n) {
      if (n == count) direct = static_cast<const uint8_t*>(span.input) + at * element_size;
    });
  }
  if (direct != nullptr) return direct;
  ForEachSpanPiece(
      spans, begin, count, [&](const ReduceSpan& span, size_t at, size_t to, size_t n) {
        ScaleCopy(gather + to * element_size,
                  static_cast<const uint8_t*>(span.input) + at * element_size, n, dtype, prescale);
      });
  return gather;
}

void ShmSingleCopy::PeerRanges(int owner, size_t begin, size_t count, size_t element_size,
                               bool outputs) {
  ranges_.clear();
  const uint8_t* board = plane_.board(owner);
  const size_t spans = ReadHeader(board).spans;
  Cursor& cursor = cursors_[owner];
  if (begin < cursor.first) cursor = Cursor{};  // pieces go forward; start over otherwise
  const size_t end = begin + count;
  for (size_t i = cursor.index, first = cursor.first; i < spans && first < end; ++i) {
    const BoardEntry entry = ReadEntry(board, i);
    const size_t last = first + entry.count;
    if (last <= begin) {
      cursor = Cursor{i + 1, last};  // wholly before this piece and every later one
    } else {
      const size_t lo = std::max(begin, first);
      const size_t hi = std::min(end, last);
      const uint64_t base = outputs ? entry.output : entry.input;
      ranges_.push_back({base + (lo - first) * element_size, (hi - lo) * element_size});
    }
    first = last;
  }
}

}  // namespace kolo::ops
