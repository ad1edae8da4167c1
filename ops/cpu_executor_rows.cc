// CpuExecutor's collectives that move rows of dimension 0 between ranks: allgather,
// reducescatter and alltoall (ops/cpu_executor.h states the contract), their fused buffers laid
// out as on every path (core/fusion/fusion_layout.h). Allreduce, broadcast and the dispatch are
// in cpu_executor.cc.
#include <cstdint>
#include <cstring>

#include "core/fusion/fusion_layout.h"
#include "core/op_validation.h"
#include "ops/cpu_executor.h"
#include "ops/hierarchical_reducescatter.h"
#include "ops/pairwise_alltoall.h"
#include "ops/phase_scope.h"
#include "ops/reduce_kernels.h"
#include "ops/ring_allgather.h"
#include "ops/ring_reducescatter.h"
#include "ops/shm_allgather.h"
#include "ops/shm_alltoall.h"
#include "ops/shm_reducescatter.h"

namespace kolo::ops {
namespace {

// Whether a reducescatter's output may be written while its input is read (ShmReducescatter):
// it lies outside the input's `total` bytes, or is exactly this rank's block of it (in place).
bool DisjointOrOwnBlock(const TensorEntry& entry, size_t total, size_t own_offset) {
  const auto in = reinterpret_cast<uintptr_t>(entry.input.data);
  const auto out = reinterpret_cast<uintptr_t>(entry.output.data);
  const size_t out_bytes = entry.output.num_bytes();
  return out + out_bytes <= in || out >= in + total || out == in + own_offset;
}

}  // namespace

Status CpuExecutor::Allgather(const Response& response, const std::vector<TensorEntry*>& entries,
                              PhaseObserver* observer) {
  const std::string what = DescribeOp(response.op, entries);
  const int me = plane_.rank();
  StatusOr<AllgatherLayout> layout = AllgatherLayout::Of(response, entries, me, plane_.size());
  if (!layout.ok()) return layout.status().WithContext(what);
  const size_t tensors = entries.size();
  std::vector<void*> outputs(tensors);
  for (size_t t = 0; t < tensors; ++t) {
    // nullptr: the allocator failed; this rank still relays, only that tensor's op fails.
    outputs[t] = AllocateOutput(*entries[t], layout->output_shape(t), what);
  }
  const std::vector<size_t>& block_bytes = layout->block_bytes();
  // Every rank's block into place at `data` (laid out as the blocks, back to back): through
  // the job's shared memory on one host, hierarchically on several (UseHierarchy), else a ring.
  const bool hierarchical = Hierarchical(response, layout->total_bytes());
  const char* gather_phase = shm_ != nullptr ? "SHM_ALLGATHER"
                             : hierarchical  ? "HIERARCHICAL_ALLGATHER"
                                             : "RING_ALLGATHER";
  auto gather = [&](void* data) {
    if (shm_ != nullptr) return ShmAllgatherBlocks(*shm_, data, block_bytes, what);
    return hierarchical ? HierarchicalAllgather(host_planes_, data, block_bytes, what)
                        : RingAllgather(plane_, data, block_bytes, what);
  };
  if (tensors == 1 && outputs[0] != nullptr) {
    // Gather straight into the output: its layout is the ring's.
    uint8_t* output = static_cast<uint8_t*>(outputs[0]);
    {
      PhaseScope phase(observer, "COPY_INPUT");
      if (block_bytes[me] > 0)
        std::memcpy(output + layout->own_offset(), entries[0]->input.data, block_bytes[me]);
    }
    PhaseScope phase(observer, gather_phase);
    return gather(output);
  }
  // Through the fusion buffer (core/fusion/fusion_layout.h).
  fusion_buffer_.Reserve(layout->total_bytes());
  uint8_t* fused = fusion_buffer_.data();
  {
    PhaseScope phase(observer, "MEMCPY_IN_FUSION_BUFFER");
    for (size_t t = 0; t < tensors; ++t) {
      const AllgatherLayout::Piece& own = layout->piece(t, me);
      if (own.bytes > 0) std::memcpy(fused + own.buffer_offset, entries[t]->input.data, own.bytes);
    }
  }
  {
    PhaseScope phase(observer, gather_phase);
    KOLO_RETURN_IF_ERROR(gather(fused));
  }
  PhaseScope phase(observer, "MEMCPY_OUT_FUSION_BUFFER");
  for (int r = 0; r < plane_.size(); ++r) {
    for (size_t t = 0; t < tensors; ++t) {
      const AllgatherLayout::Piece& piece = layout->piece(t, r);
      if (outputs[t] != nullptr && piece.bytes > 0) {
        std::memcpy(static_cast<uint8_t*>(outputs[t]) + piece.output_offset,
                    fused + piece.buffer_offset, piece.bytes);
      }
    }
  }
  return Status::Ok();
}

Status CpuExecutor::Reducescatter(const Response& response,
                                  const std::vector<TensorEntry*>& entries,
                                  PhaseObserver* observer) {
  const std::string what = DescribeOp(response.op, entries);
  const int n = plane_.size();
  const int me = plane_.rank();
  const size_t tensors = entries.size();
  if (tensors == 0) return Internal(what + ": no tensors");
  const size_t element_size = DataTypeSize(response.dtype);
  StatusOr<ReducescatterLayout> layout = LayOutReducescatter(entries, response.dtype, me, n);
  if (!layout.ok()) return layout.status().WithContext(what);
  const std::vector<size_t>& parts = layout->parts;
  const std::vector<size_t>& block_elements = layout->block_elements;
  size_t total = 0;
  for (size_t count : block_elements) total += count;
  // The blocks lie in rank order, or place-major for the hierarchical path
  // (ops/hierarchical_reducescatter.h).
  const bool hierarchical = Hierarchical(response, total * element_size);
  auto block_of = [&](int i) { return hierarchical ? place_major_order_[i] : i; };
  size_t own_offset = 0, offset = 0;
  for (int i = 0; i < n; ++i) {
    if (block_of(i) == me) own_offset = offset;
    offset += block_elements[block_of(i)];
  }
  const ReduceOp op =  // average sums, and divides at the end
      response.reduce_op == ReduceOp::kAverage ? ReduceOp::kSum : response.reduce_op;
  if (shm_ != nullptr && tensors == 1 && response.prescale == 1.0 &&
      DisjointOrOwnBlock(*entries[0], total * element_size, own_offset * element_size)) {
    // One tensor on one host: its input is rank-major already, so the slots read it where it
    // is and this rank's block is reduced straight into the output.
    void* output = entries[0]->output.data;
    const size_t count = block_elements[me];
    {
      PhaseScope phase(observer, "SHM_REDUCESCATTER");
      KOLO_RETURN_IF_ERROR(ShmReducescatter(*shm_, entries[0]->input.data, output, block_elements,
                                            response.dtype, op, what));
    }
    const double post = PostFactor(response);
    if (post != 1.0 ||
        (response.reduce_op == ReduceOp::kAverage && !IsFloatingPoint(response.dtype))) {
      PhaseScope phase(observer, "SCALE_OUTPUT");
      FinishIntegerAverage(response, output, count);
      ScaleCopy(output, output, count, response.dtype, post);
    }
    return Status::Ok();
  }
  // Rank-major: block r holds part r of every tensor, so the ring leaves this rank's parts
  // together; the blocks lie in block_of's order. For one tensor in rank order this is just its
  // input, scaled (the input stays untouched).
  fusion_buffer_.Reserve(total * element_size);
  uint8_t* work = fusion_buffer_.data();
  {
    PhaseScope phase(observer, "MEMCPY_IN_FUSION_BUFFER");
    std::vector<size_t> part_offset(static_cast<size_t>(n) * tensors);  // tensor t, rank r
    for (size_t t = 0; t < tensors; ++t) {
      for (size_t r = 0, before = 0; r < static_cast<size_t>(n); ++r) {
        part_offset[t * n + r] = before;
        before += parts[t * n + r];
      }
    }
    offset = 0;
    for (int i = 0; i < n; ++i) {
      const int r = block_of(i);
      for (size_t t = 0; t < tensors; ++t) {
        const size_t count = parts[t * n + r];
        const uint8_t* input = static_cast<const uint8_t*>(entries[t]->input.data);
        if (count > 0) {
          ScaleCopy(work + offset * element_size, input + part_offset[t * n + r] * element_size,
                    count, response.dtype, response.prescale);
        }
        offset += count;
      }
    }
  }
  if (hierarchical) {
    PhaseScope phase(observer, "HIERARCHICAL_REDUCESCATTER");
    KOLO_RETURN_IF_ERROR(HierarchicalReducescatter(host_planes_, work, block_elements,
                                                   response.dtype, op, scratch_, what));
  } else if (shm_ != nullptr) {
    PhaseScope phase(observer, "SHM_REDUCESCATTER");
    KOLO_RETURN_IF_ERROR(ShmReducescatter(*shm_, work, work + own_offset * element_size,
                                          block_elements, response.dtype, op, what));
  } else {
    PhaseScope phase(observer, "RING_REDUCESCATTER");
    KOLO_RETURN_IF_ERROR(RingReducescatterBlocks(plane_, work, block_elements, response.dtype,
                                                 response.reduce_op, scratch_, what));
  }
  PhaseScope phase(observer, "MEMCPY_OUT_FUSION_BUFFER");
  uint8_t* own = work + own_offset * element_size;
  FinishIntegerAverage(response, own, block_elements[me]);
  const double post = PostFactor(response);
  for (size_t t = 0; t < tensors; ++t) {
    const size_t count = parts[t * n + me];
    if (count > 0) ScaleCopy(entries[t]->output.data, own, count, response.dtype, post);
    own += count * element_size;
  }
  return Status::Ok();
}

Status CpuExecutor::Alltoall(const Response& response, const std::vector<TensorEntry*>& entries,
                             PhaseObserver* observer) {
  const std::string what = DescribeOp(response.op, entries);
  const int n = plane_.size();
  const int me = plane_.rank();
  if (entries.size() != 1 || response.splits.size() != static_cast<size_t>(n) * n) {
    return Internal(what + ": expected one tensor and a " + std::to_string(n) + "x" +
                    std::to_string(n) + " split matrix");
  }
  TensorEntry& entry = *entries[0];
  const std::vector<int64_t>& in_shape = entry.input.shape;
  size_t row_bytes = DataTypeSize(response.dtype);
  for (size_t d = 1; d < in_shape.size(); ++d) row_bytes *= static_cast<size_t>(in_shape[d]);
  auto rows = [&](int from, int to) { return response.splits[from * n + to]; };
  std::vector<ByteBlock> send(n), recv(n);
  std::vector<int64_t> out_shape = in_shape;
  out_shape[0] = 0;
  size_t send_offset = 0, recv_offset = 0;
  for (int peer = 0; peer < n; ++peer) {
    send[peer] = {send_offset, static_cast<size_t>(rows(me, peer)) * row_bytes};
    recv[peer] = {recv_offset, static_cast<size_t>(rows(peer, me)) * row_bytes};
    send_offset += send[peer].bytes;
    recv_offset += recv[peer].bytes;
    out_shape[0] += rows(peer, me);
  }
  if (send_offset != entry.input.num_bytes()) {
    return Internal(what + ": the split matrix does not cover this rank's input");
  }
  void* output = AllocateOutput(entry, out_shape, what);
  if (output == nullptr) {
    // This rank still sends its blocks; only its own op fails.
    fusion_buffer_.Reserve(recv_offset);
    output = fusion_buffer_.data();
  }
  if (entry.received_splits != nullptr) {
    entry.received_splits->clear();
    for (int peer = 0; peer < n; ++peer) entry.received_splits->push_back(rows(peer, me));
  }
  if (shm_ != nullptr) {
    std::vector<size_t> matrix_bytes(static_cast<size_t>(n) * n);
    for (size_t i = 0; i < matrix_bytes.size(); ++i) {
      matrix_bytes[i] = static_cast<size_t>(response.splits[i]) * row_bytes;
    }
    PhaseScope phase(observer, "SHM_ALLTOALL");
    return ShmAlltoall(*shm_, entry.input.data, send, output, recv, matrix_bytes, what);
  }
  PhaseScope phase(observer, "PAIRWISE_ALLTOALL");
  return PairwiseAlltoall(plane_, entry.input.data, send, output, recv, what);
}

void* CpuExecutor::AllocateOutput(TensorEntry& entry, const std::vector<int64_t>& shape,
                                  const std::string& what) {
  void* output = nullptr;
  try {  // user code at a thread boundary
    output = entry.allocate ? entry.allocate(shape) : nullptr;
  } catch (...) {
    output = nullptr;
  }
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (output == nullptr && elements > 0) {
    entry.local_error = InvalidArgument(what + ": the output allocator returned no memory for " +
                                        ShapeToString(shape));
    return nullptr;
  }
  entry.output.data = output;
  entry.output.shape = shape;
  return output != nullptr ? output : entry.input.data;  // nothing to write when empty
}

}  // namespace kolo::ops
