// ReduceSpan, ReduceScaling and the walks over them: a (possibly fused) allreduce's tensors as
// the shared-memory algorithms see them (ops/shm_allreduce.h, ops/shm_single_copy.h), one
// logical buffer that is the concatenation of the spans. Called on the background thread; pure
// functions over caller-owned memory.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kolo/types.h"

namespace kolo::ops {

// One tensor of a (possibly fused) allreduce: `count` elements read from `input`, results
// written to `output` (the same pointer for in place).
struct ReduceSpan {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
};

// What happens to the elements besides the reduction.
struct ReduceScaling {
  double prescale = 1.0;   // applied to each rank's values before they are reduced
  double postscale = 1.0;  // applied to the result
  // > 0: integer average, result * postscale / divisor in one rounding (ScaleDivideInPlace).
  int64_t divisor = 0;
};

// Calls fn(span, first element in the span, first element in the range, element count) for
// each span's piece of elements [begin, begin + count) of the concatenated spans, in order.
template <typename Fn>
void ForEachSpanPiece(const std::vector<ReduceSpan>& spans, size_t begin, size_t count, Fn&& fn) {
  size_t span_begin = 0;  // first element of the span in the concatenation
  for (const ReduceSpan& span : spans) {
    if (span_begin >= begin + count) break;
    const size_t span_end = span_begin + span.count;
    const size_t lo = std::max(begin, span_begin);
    const size_t hi = std::min(begin + count, span_end);
    if (lo < hi) fn(span, lo - span_begin, lo - begin, hi - lo);
    span_begin = span_end;
  }
}

// Total elements of the spans.
size_t TotalCount(const std::vector<ReduceSpan>& spans);

// [begin, end) of rank `r`'s slice of `count` elements: equal parts rounded up to whole cache
// lines (64 bytes of elements), so that no two ranks write the same line of a buffer whose
// start is line-aligned. Ranks past the end get an empty slice.
std::pair<size_t, size_t> RankSlice(size_t count, int ranks, int r, size_t element_size);

// Applies the postscale or the integer average to `n` reduced elements at `result`.
void ScaleResult(uint8_t* result, size_t n, DataType dtype, const ReduceScaling& scaling);

}  // namespace kolo::ops
