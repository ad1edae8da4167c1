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

}  // namespace

Status ShmAllreduce::Run(const std::vector<ReduceSpan>& spans, DataType dtype, ReduceOp op,
                         const ReduceScaling& scaling, const std::string& what,
                         std::optional<uint64_t> staged) {
  if (single_copy_.Fits(spans, dtype)) {
    KOLO_ASSIGN_OR_RETURN(const bool done, single_copy_.Run(spans, dtype, op, scaling, what));
    if (done) {
      ++single_copy_ops_;
      return Status::Ok();
    }
  }
  return RunThroughSlots(spans, dtype, op, scaling, what, staged);
}

std::optional<uint64_t> ShmAllreduce::Stage(const void* input, size_t count, DataType dtype,
                                            double prescale) {
  const size_t element_size = DataTypeSize(dtype);
  const size_t bytes = count * element_size;
  if (prescale != 1.0 || plane_.size() < 2 || count == 0 || input == nullptr ||
      bytes > kStageMaxBytes || bytes > plane_.slot_bytes()) {
    return std::nullopt;
  }
  std::vector<ReduceSpan>& spans = stage_span_;  // kept: a small op's path allocates nothing
  spans.assign(1, ReduceSpan{input, nullptr, count});
  if (single_copy_.Fits(spans, dtype)) return std::nullopt;
  // As RunThroughSlots copies a chunk in with own_from_input, into the set it will take.
  const uint64_t chunk = plane_.chunks_taken();
  const int set = static_cast<int>(chunk % SharedMemoryPlane::kSlotSets);
  const auto [lo, hi] = RankSlice(count, plane_.size(), plane_.rank(), element_size);
  uint8_t* mine = plane_.slot(set, plane_.rank());
  GatherInputs(spans, 0, lo, mine, dtype, 1.0);
  GatherInputs(spans, hi, count - hi, mine + hi * element_size, dtype, 1.0);
  return chunk;
}

Status ShmAllreduce::RunThroughSlots(const std::vector<ReduceSpan>& spans, DataType dtype,
                                     ReduceOp op, const ReduceScaling& scaling,
                                     const std::string& what, std::optional<uint64_t> staged) {
  const size_t element_size = DataTypeSize(dtype);
  const size_t total = TotalCount(spans);
  const size_t chunk_elements = plane_.slot_bytes() / element_size;
  const bool stream = total * element_size >= kStreamOutputBytes;
  // This rank's own slice is reduced straight from its input, so it skips the copy in; a
  // prescale (applied while copying) or a job of one rank copies it like the rest.
  const bool own_from_input = scaling.prescale == 1.0 && plane_.size() > 1;
  // Every rank's input is in its slot already, and every rank knows it (Stage): the same
  // answer on every rank, from what every rank agreed on and the chunks every rank ran.
  const bool skip_first_sync = staged.has_value() && own_from_input && total <= chunk_elements &&
                               total * element_size <= kStageMaxBytes &&
                               *staged == plane_.chunks_taken();
  if (skip_first_sync) return RunStaged(spans, total, dtype, op, scaling, what);
  for (size_t begin = 0; begin < total; begin += chunk_elements) {
    const size_t count = std::min(chunk_elements, total - begin);
    const int set = plane_.NextSlotSet();
    const auto [lo, hi] = RankSlice(count, plane_.size(), plane_.rank(), element_size);
    uint8_t* mine = plane_.slot(set, plane_.rank());
    if (own_from_input) {
      GatherInputs(spans, begin, lo, mine, dtype, 1.0);
      GatherInputs(spans, begin + hi, count - hi, mine + hi * element_size, dtype, 1.0);
    } else {
      GatherInputs(spans, begin, count, mine, dtype, scaling.prescale);
    }
    KOLO_RETURN_IF_ERROR(plane_.Sync(what));
    ReduceSlice(spans, begin, set, count, dtype, op, scaling, own_from_input);
    KOLO_RETURN_IF_ERROR(plane_.Sync(what));
    if (!own_from_input) {
      ScatterOutputs(spans, begin, count, plane_.slot(set, 0), element_size, stream);
      continue;
    }
    for (int r = 0; r < plane_.size(); ++r) {
      const auto [rlo, rhi] = RankSlice(count, plane_.size(), r, element_size);
      if (rlo >= rhi) continue;
      ScatterOutputs(spans, begin + rlo, rhi - rlo, plane_.slot(set, r) + rlo * element_size,
                     element_size, stream);
    }
  }
  return Status::Ok();
}

Status ShmAllreduce::RunStaged(const std::vector<ReduceSpan>& spans, size_t total, DataType dtype,
                               ReduceOp op, const ReduceScaling& scaling, const std::string& what) {
  const size_t element_size = DataTypeSize(dtype);
  const int set = plane_.NextSlotSet();
  ++staged_ops_;
  ReduceSlice(spans, 0, set, total, dtype, op, scaling, /*own_from_input=*/true);
  KOLO_RETURN_IF_ERROR(plane_.Sync(what));
  for (int r = 0; r < plane_.size(); ++r) {
    const auto [lo, hi] = RankSlice(total, plane_.size(), r, element_size);
    if (lo >= hi) continue;
    ScatterOutputs(spans, lo, hi - lo, plane_.slot(set, r) + lo * element_size, element_size,
                   /*stream=*/false);
  }
  return Status::Ok();
}

void ShmAllreduce::GatherInputs(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                                uint8_t* dst, DataType dtype, double prescale) {
  const size_t element_size = DataTypeSize(dtype);
  ForEachSpanPiece(
      spans, begin, count, [&](const ReduceSpan& span, size_t at, size_t to, size_t n) {
        ScaleCopy(dst + to * element_size,
                  static_cast<const uint8_t*>(span.input) + at * element_size, n, dtype, prescale);
      });
}

void ShmAllreduce::ScatterOutputs(const std::vector<ReduceSpan>& spans, size_t begin, size_t count,
                                  const uint8_t* src, size_t element_size, bool stream) {
  ForEachSpanPiece(spans, begin, count,
                   [&](const ReduceSpan& span, size_t at, size_t from, size_t n) {
                     uint8_t* dst = static_cast<uint8_t*>(span.output) + at * element_size;
                     if (stream) {
                       StreamCopy(dst, src + from * element_size, n * element_size);
                     } else {
                       std::memcpy(dst, src + from * element_size, n * element_size);
                     }
                   });
}

void ShmAllreduce::ReduceSlice(const std::vector<ReduceSpan>& spans, size_t begin, int set,
                               size_t count, DataType dtype, ReduceOp op,
                               const ReduceScaling& scaling, bool own_from_input) {
  const size_t element_size = DataTypeSize(dtype);
  const int me = plane_.rank();
  const auto [lo, hi] = RankSlice(count, plane_.size(), me, element_size);
  if (lo >= hi) return;
  const size_t offset = lo * element_size;
  const size_t n = hi - lo;
  // Every rank's values in rank order, 0 first: the same order as when every slice was
  // reduced from the slots alone, so results do not depend on how slices fall.
  if (!own_from_input) {  // every rank's values are in the slots; the result goes to rank 0's
    uint8_t* result = plane_.slot(set, 0) + offset;
    for (int r = 1; r < plane_.size(); ++r) {
      Reduce(result, plane_.slot(set, r) + offset, n, dtype, op);
    }
    ScaleResult(result, n, dtype, scaling);
    return;
  }
  // This rank's values come from its input (`nullptr` below), the others' from their slots;
  // the result goes to this rank's own slot, where no input was copied.
  uint8_t* result = plane_.slot(set, me) + offset;
  auto source = [&](int r) -> const uint8_t* {
    return r == me ? nullptr : plane_.slot(set, r) + offset;
  };
  const uint8_t* first = source(0);
  const uint8_t* second = source(1);
  if (first != nullptr && second != nullptr) {
    ReduceInto(result, first, second, n, dtype, op);
  } else {
    ForEachSpanPiece(
        spans, begin + lo, n, [&](const ReduceSpan& span, size_t at, size_t to, size_t k) {
          const uint8_t* in = static_cast<const uint8_t*>(span.input) + at * element_size;
          const size_t skip = to * element_size;
          ReduceInto(result + skip, first != nullptr ? first + skip : in,
                     second != nullptr ? second + skip : in, k, dtype, op);
        });
  }
  for (int r = 2; r < plane_.size(); ++r) {
    if (r != me) {
      Reduce(result, source(r), n, dtype, op);
      continue;
    }
    ForEachSpanPiece(
        spans, begin + lo, n, [&](const ReduceSpan& span, size_t at, size_t to, size_t k) {
          Reduce(result + to * element_size,
                 static_cast<const uint8_t*>(span.input) + at * element_size, k, dtype, op);
        });
  }
  ScaleResult(result, n, dtype, scaling);
}

}  // namespace kolo::ops
