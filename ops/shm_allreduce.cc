#include "ops/shm_allreduce.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ops/reduce_kernels.h"

namespace kolo::ops {
namespace {

// Results of an op at least this large go to the outputs with non-temporal stores: the
// outputs would not stay in cache anyway, and streaming them skips reading every destination
// line before writing it (a third of the op's memory traffic).
constexpr size_t kStreamOutputBytes = size_t{8} << 20;

// memcpy that bypasses the cache for the destination where the CPU allows it.
void StreamCopy(uint8_t* dst, const uint8_t* src, size_t bytes) {
#if defined(__SSE2__)
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);
  _mm_sfence();  // streamed stores are weakly ordered: complete them before anyone reads
#else
  std::memcpy(dst, src, bytes);
#endif
}

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
    ScatterOutputs(spans, begin, count, plane_.slot(set, 0), element_size,
                   total * element_size >= kStreamOutputBytes);
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
                                  const uint8_t* src, size_t element_size, bool stream) {
  size_t span_begin = 0;
  for (const ReduceSpan& span : spans) {
    const size_t span_end = span_begin + span.count;
    const size_t lo = std::max(begin, span_begin);
    const size_t hi = std::min(begin + count, span_end);
    if (lo < hi) {
      uint8_t* dst = static_cast<uint8_t*>(span.output) + (lo - span_begin) * element_size;
      const uint8_t* from = src + (lo - begin) * element_size;
      if (stream) {
        StreamCopy(dst, from, (hi - lo) * element_size);
      } else {
        std::memcpy(dst, from, (hi - lo) * element_size);
      }
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
  if (scaling.divisor > 0) {
    ScaleDivideInPlace(result, hi - lo, dtype, scaling.postscale, scaling.divisor);
  } else if (scaling.postscale != 1.0) {
    ScaleCopy(result, result, hi - lo, dtype, scaling.postscale);
  }
}

}  // namespace kolo::ops
