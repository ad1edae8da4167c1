// ShmSingleCopy: allreduce straight between the ranks' tensors, through a SharedMemoryPlane's
// single copy (core/shared_memory_plane.h: ReadPeer, WritePeer; process_vm_readv/writev), for
// the sizes where that moves fewer bytes than staging them through the slots
// (ops/shm_allreduce.h). Each rank writes its tensors' addresses on its board and syncs. Rank j
// then reduces slice j of the concatenated tensors, one piece (kPieceBytes, below) at a time so
// that a piece's operands and result stay in the core's cache: it reads each peer's values for the
// piece from the peer's input into a scratch, reduces every rank's values in rank order, 0
// first (its own straight from its input), applies the postscale or integer average, copies
// the result to its own output and writes it into every peer's output. A last sync ends the op,
// so no rank returns while a peer may still read or write its memory. Each element is computed
// once, by one rank, in rank order for every dtype and op, as in the slot path: every rank
// gets the same bits, and the bits do not depend on the path or on where slices fall. No
// syncs between pieces: per op two, whatever its size (the slot path has two per slot).
// Bytes per op and rank: docs/PERFORMANCE.md, "Bytes moved".
//
// Threading: background thread only (like the executor that owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/shared_memory_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/aligned_buffer.h"
#include "ops/reduce_spans.h"

namespace kolo::ops {

// Where single copy starts, and the pieces it works in (ShmSingleCopy below). Tests make them
// small, to cut few elements into many pieces.
struct ShmSingleCopyTuning {
  // Bytes of one piece of a rank's slice: the scratches (two, three with a prescale or a
  // fused input) and the result stay in a core's L2 (docs/PERFORMANCE.md, "Single copy").
  static constexpr size_t kPieceBytes = size_t{256} << 10;
  // Smallest op that goes this way: below it the system calls cost more than the copies they
  // save (docs/PERFORMANCE.md, "Single copy").
  static constexpr size_t kMinBytes = size_t{256} << 10;
  // Most bytes of tensors out of place (output not the input) on any rank of an op that goes
  // this way; more send every rank through the slots. Out of place, single copy lost to the
  // slots from 16 MiB on (32 MiB: 11.5 ms against 7.0; twice the system time), while in place
  // it wins at every size (docs/PERFORMANCE.md, "Single copy out of place").
  static constexpr size_t kMaxOutOfPlaceBytes = size_t{8} << 20;

  size_t piece_bytes = kPieceBytes;  // a positive multiple of 64
  size_t min_bytes = kMinBytes;
  size_t max_out_of_place_bytes = kMaxOutOfPlaceBytes;
};

class ShmSingleCopy {
 public:
  using Tuning = ShmSingleCopyTuning;

  // `plane` must outlive this object.
  explicit ShmSingleCopy(SharedMemoryPlane& plane, const Tuning& tuning = Tuning());

  // Whether an allreduce of `spans` of `dtype` may go this way: the plane has single copy, the
  // job more than one rank, the op at least min_bytes and at most the plane's
  // single_copy_max_bytes(), and its tensors' addresses fit on the board. The same answer on every
  // rank (it depends only on what the ranks agree on).
  bool Fits(const std::vector<ReduceSpan>& spans, DataType dtype) const;

  // Collective, for an op that Fits: every rank calls it with the same spans' counts, dtype,
  // op and scaling (the spans differ only in their pointers). Blocks until every output holds
  // the result and returns true; returns false, having synced once and moved nothing, on every
  // rank when some rank's tensors overlap one another (besides input == output of one tensor)
  // or hold more than max_out_of_place_bytes out of place, which the caller then runs through
  // the slots. Fails (job-fatal: the plane is unusable afterwards) when a sync or a copy from
  // or to a peer fails; `what` prefixes the message.
  StatusOr<bool> Run(const std::vector<ReduceSpan>& spans, DataType dtype, ReduceOp op,
                     const ReduceScaling& scaling, const std::string& what);

 private:
  // Where PeerRanges resumes in a rank's board: the first entry not wholly before the last
  // piece, and its first element in the concatenation.
  struct Cursor {
    size_t index = 0;
    size_t first = 0;
  };

  // Memory a span reads or writes.
  struct Extent {
    uintptr_t begin;
    uintptr_t end;
    bool output;
  };

  // Writes the spans' addresses and counts, whether they overlap and how many of their bytes
  // are out of place, on this rank's board.
  void Publish(const std::vector<ReduceSpan>& spans, size_t element_size);
  // Whether some span's memory overlaps another's (two inputs may: both are only read; a span
  // whose input is its output is in place, not an overlap). Peers write a rank's outputs while
  // others read its inputs, so overlapping memory could be read after it was overwritten.
  bool Overlaps(const std::vector<ReduceSpan>& spans, size_t element_size);
  // After the first sync: checks that every rank published `total` elements (else Internal)
  // and whether any rank's tensors overlap or are too many bytes out of place (then false).
  StatusOr<bool> CheckBoards(size_t total, const std::string& what) const;
  // Reduces, scales and delivers elements [begin, begin + count) of the concatenation.
  Status ReducePiece(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                     DataType dtype, ReduceOp op, const ReduceScaling& scaling,
                     const std::string& what);
  // Rank `peer`'s values of elements [begin, begin + count), read into `into` and prescaled.
  Status ReadValues(int peer, size_t begin, size_t count, DataType dtype, double prescale,
                    uint8_t* into, const std::string& what);
  // This rank's values of those elements: a pointer into its input where they lie in one
  // tensor and need no prescale, else gathered (and prescaled) into `gather`.
  const uint8_t* OwnValues(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                           DataType dtype, double prescale, uint8_t* gather) const;
  // This rank's output of those elements where they lie in one tensor, else null.
  uint8_t* WholeOutput(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                       size_t element_size) const;
  // Rank `owner`'s ranges (its inputs or its outputs, as its board says) that hold elements
  // [begin, begin + count), into ranges_.
  void PeerRanges(int owner, size_t begin, size_t count, size_t element_size, bool outputs);

  // Constant after construction.
  SharedMemoryPlane& plane_;
  const Tuning tuning_;
  // Background thread only.
  AlignedBuffer result_;  // the result of a piece across tensors; or of the ranks before this one
  AlignedBuffer values_;  // a peer's values
  AlignedBuffer gather_;  // this rank's values, when they must be gathered or prescaled
  std::vector<PeerRange> ranges_;
  std::vector<Cursor> cursors_;  // one per rank, reset every op
  std::vector<Extent> extents_;
};

}  // namespace kolo::ops
