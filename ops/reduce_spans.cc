#include "ops/reduce_spans.h"

#include "ops/reduce_kernels.h"

namespace kolo::ops {

size_t TotalCount(const std::vector<ReduceSpan>& spans) {
  size_t total = 0;
  for (const ReduceSpan& span : spans) total += span.count;
  return total;
}

std::pair<size_t, size_t> RankSlice(size_t count, int ranks, int r, size_t element_size) {
  const size_t line = std::max<size_t>(1, 64 / element_size);
  size_t per = (count + ranks - 1) / ranks;
  per = (per + line - 1) / line * line;
  const size_t begin = std::min(count, per * r);
  return {begin, std::min(count, begin + per)};
}

void ScaleResult(uint8_t* result, size_t n, DataType dtype, const ReduceScaling& scaling) {
  if (scaling.divisor > 0) {
    ScaleDivideInPlace(result, n, dtype, scaling.postscale, scaling.divisor);
  } else if (scaling.postscale != 1.0) {
    ScaleCopy(result, result, n, dtype, scaling.postscale);
  }
}

}  // namespace kolo::ops
