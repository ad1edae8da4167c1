#include "ops/shm_allreduce.h"

#include <algorithm>
#include <cstring>

#include "ops/reduce_kernels.h"

namespace kolo::ops {
namespace {

// [begin, end) of rank `r`'s slice of a chunk of `count` elements: equal parts rounded up to
// whole cache lines, so no two ranks write the same line.
std::pair<size_t, size_t> Slice(size_t count, int ranks, int r, size_t element_size) {
  const size_t line = std::max<size_t>(1, 64 / element_size);
  size_t per = (count + ranks - 1) / ranks;
  per = (per + line - 1) / line * line;
  const size_t begin = std::min(count, per * r);
  return {begin, std::min(count, begin + per)};
}

}  // namespace

Status ShmAllreduce::Run(const std::vector<ReduceSpan>& spans, DataType dtype, ReduceOp op,
                         const ReduceScaling& scaling, const std::string& what) {
  const size_t element_size = DataTypeSize(dtype);
  size_t total = 0;
  for (const ReduceSpan& span : spans) total += span.count;
  const size_t chunk_elements = plane_.slot_bytes() / element_size;
  for (size_t begin = 0; begin < total; begin += chunk_elements) {
    const size_t count = std::min(chunk_elements, total - begin);
    const int set = plane_.NextSlotSet();
    GatherInputs(spans, begin, count, plane_.slot(set, plane_.rank()), dtype, scaling.prescale);
    KOLO_RETURN_IF_ERROR(plane_.Sync(what));
    ReduceSlice(set, count, dtype, op, scaling);
    KOLO_RETURN_IF_ERROR(plane_.Sync(what));
    ScatterOutputs(spans, begin, count, plane_.slot(set, 0), element_size);
  }
  return Status::Ok();
}

void ShmAllreduce::GatherInputs(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                                uint8_t* dst, DataType dtype, double prescale) {
  const size_t element_size = DataTypeSize(dtype);
  size_t span_begin = 0;  // first element of the span in the concatenation
  for (const ReduceSpan& span : spans) {
    const size_t span_end = span_begin + span.count;
    const size_t lo = std::max(begin, span_begin);
    const size_t hi = std::min(begin + count, span_end);
    if (lo < hi) {
      ScaleCopy(dst + (lo - begin) * element_size,
                static_cast<const uint8_t*>(span.input) + (lo - span_begin) * element_size, hi - lo,
                dtype, prescale);
    }
    span_begin = span_end;
    if (span_begin >= begin + count) break;
  }
}

void ShmAllreduce::ScatterOutputs(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                                  const uint8_t* src, size_t element_size) {
  size_t span_begin = 0;
  for (const ReduceSpan& span : spans) {
    const size_t span_end = span_begin + span.count;
    const size_t lo = std::max(begin, span_begin);
    const size_t hi = std::min(begin + count, span_end);
    if (lo < hi) {
      std::memcpy(static_cast<uint8_t*>(span.output) + (lo - span_begin) * element_size,
                  src + (lo - begin) * element_size, (hi - lo) * element_size);
    }
    span_begin = span_end;
    if (span_begin >= begin + count) break;
  }
}

void ShmAllreduce::ReduceSlice(int set, size_t count, DataType dtype, ReduceOp op,
                               const ReduceScaling& scaling) {
  const size_t element_size = DataTypeSize(dtype);
  const auto [lo, hi] = Slice(count, plane_.size(), plane_.rank(), element_size);
  if (lo >= hi) return;
  const size_t offset = lo * element_size;
  uint8_t* result = plane_.slot(set, 0) + offset;  // rank 0's values are the starting point
  for (int r = 1; r < plane_.size(); ++r) {
    Reduce(result, plane_.slot(set, r) + offset, hi - lo, dtype, op);
  }
  if (scaling.divisor > 0) DivideInPlace(result, hi - lo, dtype, scaling.divisor);
  if (scaling.postscale != 1.0) ScaleCopy(result, result, hi - lo, dtype, scaling.postscale);
}

}  // namespace kolo::ops
