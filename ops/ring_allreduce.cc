#include "ops/ring_allreduce.h"

#include "ops/ring_exchange.h"

namespace kolo::ops {
namespace {

int Mod(int value, int n) {
  return ((value % n) + n) % n;
}

}  // namespace

ElementRange ChunkRange(size_t count, int n, int chunk) {
  const size_t parts = static_cast<size_t>(n);
  const size_t index = static_cast<size_t>(chunk);
  const size_t base = count / parts;
  const size_t extra = count % parts;  // the first `extra` chunks hold one more element
  ElementRange range;
  range.begin = index * base + (index < extra ? index : extra);
  range.count = base + (index < extra ? 1 : 0);
  return range;
}

std::vector<RingSegment> RingSchedule(int rank, int n) {
  std::vector<RingSegment> schedule;
  if (n <= 1) return schedule;
  schedule.reserve(2 * static_cast<size_t>(n - 1));
  for (int s = 0; s < n - 1; ++s) {
    schedule.push_back({Mod(rank - s, n), Mod(rank - s - 1, n), /*reduce=*/true});
  }
  for (int s = 0; s < n - 1; ++s) {
    schedule.push_back({Mod(rank + 1 - s, n), Mod(rank - s, n), /*reduce=*/false});
  }
  return schedule;
}

Status RingAllreduce(DataPlane& plane, void* buffer, size_t count, DataType dtype, ReduceOp op,
                     RingScratch& scratch, const std::string& what) {
  if (count > 0 && DataTypeSize(dtype) == 0) {
    return InvalidArgument(what + ": unsupported dtype " + DataTypeName(dtype));
  }
  return RingAllreduce(plane, SegmentedBuffer(buffer, count * DataTypeSize(dtype)), dtype, op,
                       scratch, what);
}

Status RingAllreduce(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype, ReduceOp op,
                     RingScratch& scratch, const std::string& what) {
  const int n = plane.size();
  if (buffer.total() == 0 || n == 1) return Status::Ok();
  if (DataTypeSize(dtype) == 0) {
    return InvalidArgument(what + ": unsupported dtype " + DataTypeName(dtype));
  }
  const int rank = plane.rank();
  RingExchange exchange(buffer, dtype, op, rank, n, scratch);
  if (exchange.send_total() == 0 && exchange.recv_total() == 0) return Status::Ok();
  KOLO_RETURN_IF_ERROR(plane.Exchange((rank + 1) % n, (rank - 1 + n) % n, exchange, what));
  if (!exchange.done()) {
    return Internal(what + ": the data plane finished the ring exchange before its streams");
  }
  return Status::Ok();
}

}  // namespace kolo::ops
