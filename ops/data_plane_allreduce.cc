#include "ops/data_plane_allreduce.h"

#include "ops/halving_doubling.h"
#include "ops/recursive_doubling.h"

namespace kolo::ops {

bool UseRecursiveDoubling(size_t bytes, int n, size_t scratch_bytes) {
  const size_t limit = n == 2 ? kRecursiveDoublingMaxBytesTwoRanks : kRecursiveDoublingMaxBytes;
  return n > 1 && IsPowerOfTwo(n) && bytes <= limit && bytes <= scratch_bytes;
}

Status DataPlaneAllreduce(DataPlane& plane, void* buffer, size_t count, DataType dtype, ReduceOp op,
                          RingScratch& scratch, const std::string& what) {
  if (count > 0 && DataTypeSize(dtype) == 0) {
    return InvalidArgument(what + ": unsupported dtype " + DataTypeName(dtype));
  }
  return DataPlaneAllreduce(plane, SegmentedBuffer(buffer, count * DataTypeSize(dtype)), dtype, op,
                            scratch, what);
}

Status DataPlaneAllreduce(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype,
                          ReduceOp op, RingScratch& scratch, const std::string& what) {
  if (UseRecursiveDoubling(buffer.total(), plane.size(), scratch.size())) {
    return RecursiveDoublingAllreduce(plane, buffer, dtype, op, scratch, what);
  }
  if (plane.size() > 2 && IsPowerOfTwo(plane.size())) {
    return HalvingDoublingAllreduce(plane, buffer, dtype, op, scratch, what);
  }
  return RingAllreduce(plane, buffer, dtype, op, scratch, what);
}

}  // namespace kolo::ops
