#include "ops/halving_doubling.h"

#include "ops/recursive_doubling.h"
#include "ops/ring_exchange.h"

namespace kolo::ops {
namespace {

// Elements of chunks [first, last) of `count` split into n even chunks.
ElementRange ChunksRange(size_t count, int n, int first, int last) {
  const ElementRange begin = ChunkRange(count, n, first);
  const ElementRange end = ChunkRange(count, n, last - 1);
  return {begin.begin, end.begin + end.count - begin.begin};
}

}  // namespace

std::vector<HalvingDoublingStep> HalvingDoublingSchedule(size_t count, int rank, int n) {
  std::vector<HalvingDoublingStep> steps;
  int lo = 0;
  int hi = n;  // chunks [lo, hi) are this rank's share so far
  // Recursive halving: keep the half on this rank's side of `distance`, reduce it.
  for (int distance = n / 2; distance >= 1; distance /= 2) {
    const int mid = lo + (hi - lo) / 2;
    const bool lower = (rank & distance) == 0;
    HalvingDoublingStep step;
    step.partner = rank ^ distance;
    step.send = lower ? ChunksRange(count, n, mid, hi) : ChunksRange(count, n, lo, mid);
    step.recv = lower ? ChunksRange(count, n, lo, mid) : ChunksRange(count, n, mid, hi);
    step.reduce = true;
    steps.push_back(step);
    if (lower) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  // Recursive doubling: the partner holds the other half of the range both will share.
  for (int distance = 1; distance < n; distance *= 2) {
    const int width = hi - lo;
    const bool lower = (rank & distance) == 0;
    HalvingDoublingStep step;
    step.partner = rank ^ distance;
    step.send = ChunksRange(count, n, lo, hi);
    step.recv =
        lower ? ChunksRange(count, n, hi, hi + width) : ChunksRange(count, n, lo - width, lo);
    step.reduce = false;
    steps.push_back(step);
    if (lower) {
      hi += width;
    } else {
      lo -= width;
    }
  }
  return steps;
}

Status HalvingDoublingAllreduce(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype,
                                ReduceOp op, RingScratch& scratch, const std::string& what) {
  const int n = plane.size();
  if (buffer.total() == 0 || n == 1) return Status::Ok();
  const size_t element_size = DataTypeSize(dtype);
  if (element_size == 0) {
    return InvalidArgument(what + ": unsupported dtype " + DataTypeName(dtype));
  }
  if (!IsPowerOfTwo(n)) {
    return InvalidArgument(what + ": halving-doubling needs a power-of-two number of ranks, not " +
                           std::to_string(n));
  }
  const size_t count = buffer.total() / element_size;
  for (const HalvingDoublingStep& step : HalvingDoublingSchedule(count, plane.rank(), n)) {
    // A one-step "ring": chunk 0 out, chunk 1 in; the receive lands in the scratch and is
    // reduced as it arrives, or is written straight into the buffer.
    RingExchange exchange(buffer, {step.send, step.recv}, {{0, 1, step.reduce}}, dtype, op,
                          scratch);
    if (exchange.send_total() == 0 && exchange.recv_total() == 0) continue;
    KOLO_RETURN_IF_ERROR(plane.Exchange(exchange.send_total() > 0 ? step.partner : -1,
                                        exchange.recv_total() > 0 ? step.partner : -1, exchange,
                                        what));
    if (!exchange.done()) {
      return Internal(what + ": the data plane finished a halving-doubling step early");
    }
  }
  return Status::Ok();
}

}  // namespace kolo::ops
