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

size_t AllreduceSlices(size_t bytes) {
  return bytes < 2 * kAllreduceSliceBytes ? 1 : bytes / kAllreduceSliceBytes;
}

namespace {

Status AllreduceOneSlice(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype,
                         ReduceOp op, RingScratch& scratch, const std::string& what) {
  if (UseRecursiveDoubling(buffer.total(), plane.size(), scratch.size())) {
    return RecursiveDoublingAllreduce(plane, buffer, dtype, op, scratch, what);
  }
  if (plane.size() > 2 && IsPowerOfTwo(plane.size())) {
    return HalvingDoublingAllreduce(plane, buffer, dtype, op, scratch, what);
  }
  return RingAllreduce(plane, buffer, dtype, op, scratch, what);
}

}  // namespace

Status DataPlaneAllreduce(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype,
                          ReduceOp op, RingScratch& scratch, const std::string& what) {
  const size_t slices = AllreduceSlices(buffer.total());
  const size_t element = DataTypeSize(dtype);
  if (slices == 1 || plane.size() == 1 || element == 0) {
    return AllreduceOneSlice(plane, buffer, dtype, op, scratch, what);
  }
  const size_t count = buffer.total() / element;
  for (size_t i = 0; i < slices; ++i) {
    const ElementRange range = ChunkRange(count, static_cast<int>(slices), static_cast<int>(i));
    KOLO_RETURN_IF_ERROR(
        AllreduceOneSlice(plane, buffer.Slice(range.begin * element, range.count * element), dtype,
                          op, scratch, what));
  }
  return Status::Ok();
}

}  // namespace kolo::ops
