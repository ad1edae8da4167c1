#include "ops/hierarchical_allreduce.h"

#include <cstdint>
#include <vector>

#include "ops/data_plane_allreduce.h"
#include "ops/ring_allgather.h"
#include "ops/ring_reducescatter.h"
#include "ops/shm_allgather.h"

namespace kolo::ops {

HierarchicalAllreduce::HierarchicalAllreduce(DataPlane& local, DataPlane& cross,
                                             SharedMemoryPlane* local_shm)
    : local_(local),
      cross_(cross),
      local_shm_(local_shm),
      shm_allreduce_(local_shm != nullptr ? std::make_unique<ShmAllreduce>(*local_shm) : nullptr) {}

Status HierarchicalAllreduce::Run(void* buffer, size_t count, DataType dtype, ReduceOp op,
                                  RingScratch& scratch, const std::string& what) {
  const size_t element = DataTypeSize(dtype);
  if (count > 0 && element == 0) {
    return InvalidArgument(what + ": unsupported dtype " + DataTypeName(dtype));
  }
  if (count == 0) return Status::Ok();  // the same count on every rank: nobody moves a byte
  const int n = local_.size();
  std::vector<size_t> block_elements;
  std::vector<size_t> block_bytes;
  for (int i = 0; i < n; ++i) {
    block_elements.push_back(ChunkRange(count, n, i).count);
    block_bytes.push_back(block_elements.back() * element);
  }
  if (shm_allreduce_ != nullptr) {
    // The whole host's sum on every local rank: the slots' reduction is already split among
    // them, and copying the other blocks out of the slots costs little next to the network.
    spans_.assign(1, ReduceSpan{buffer, buffer, count});
    KOLO_RETURN_IF_ERROR(shm_allreduce_->Run(spans_, dtype,
                                             op == ReduceOp::kAverage ? ReduceOp::kSum : op,
                                             ReduceScaling(), what + " (within the host)"));
  } else {
    KOLO_RETURN_IF_ERROR(RingReducescatterBlocks(local_, buffer, block_elements, dtype, op, scratch,
                                                 what + " (reduce-scatter within the host)"));
  }
  const ElementRange mine = ChunkRange(count, n, local_.rank());
  // Every rank of `cross` has the same local rank, so the same block size: all skip or none.
  if (mine.count > 0) {
    KOLO_RETURN_IF_ERROR(
        DataPlaneAllreduce(cross_, static_cast<uint8_t*>(buffer) + mine.begin * element, mine.count,
                           dtype, op, scratch, what + " (allreduce across hosts)"));
  }
  if (local_shm_ != nullptr) {
    return ShmAllgatherBlocks(*local_shm_, buffer, block_bytes,
                              what + " (allgather within the host)");
  }
  return RingAllgather(local_, buffer, block_bytes, what + " (allgather within the host)");
}

}  // namespace kolo::ops
