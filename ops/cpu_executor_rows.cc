// CpuExecutor's collectives that move rows of dimension 0 between ranks: allgather,
// reducescatter and alltoall (ops/cpu_executor.h states the contract), their fused buffers laid
// out as on every path (core/fusion/fusion_layout.h), their data moved by the first algorithm of
// the op's list that applies (ops/cpu_algorithms.h). Allreduce, broadcast and the dispatch are
// in cpu_executor.cc.
#include <cstdint>
#include <cstring>

#include "core/fusion/fusion_layout.h"
#include "core/op_validation.h"
#include "ops/cpu_algorithms.h"
#include "ops/cpu_executor.h"
#include "ops/phase_scope.h"
#include "ops/reduce_kernels.h"
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

// Average reduces as a sum; the executor divides at the end.
ReduceOp SumForAverage(ReduceOp op) {
  return op == ReduceOp::kAverage ? ReduceOp::kSum : op;
}

// A fused allgather's every piece from the gathered buffer `fused` into its tensor's output
// (none where the allocator gave none: that tensor's op fails alone).
void CopyOutOfFusionBuffer(const AllgatherLayout& layout, const uint8_t* fused,
                           const std::vector<void*>& outputs) {
  for (int r = 0; r < static_cast<int>(layout.block_bytes().size()); ++r) {
    for (size_t t = 0; t < layout.tensors(); ++t) {
      const AllgatherLayout::Piece& piece = layout.piece(t, r);
      if (outputs[t] != nullptr && piece.bytes > 0) {
        std::memcpy(static_cast<uint8_t*>(outputs[t]) + piece.output_offset,
                    fused + piece.buffer_offset, piece.bytes);
      }
    }
  }
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
  // Every rank's block into place (laid out as the blocks, back to back) by the first
  // algorithm that applies: through the job's shared memory on one host, hierarchically on
  // several (UseHierarchy), else a ring.
  const Route route{shm_ != nullptr, Hierarchical(response, layout->total_bytes())};
  if (tensors == 1 && outputs[0] != nullptr) {
    // Gather straight into the output: its layout is the ring's.
    uint8_t* output = static_cast<uint8_t*>(outputs[0]);
    {
      PhaseScope phase(observer, "COPY_INPUT");
      if (block_bytes[me] > 0)
        std::memcpy(output + layout->own_offset(), entries[0]->input.data, block_bytes[me]);
    }
    return RunFirst(kAllgatherAlgorithms, route, Planes(), AllgatherArgs{output, block_bytes, what},
                    observer);
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
  KOLO_RETURN_IF_ERROR(RunFirst(kAllgatherAlgorithms, route, Planes(),
                                AllgatherArgs{fused, block_bytes, what}, observer));
  PhaseScope phase(observer, "MEMCPY_OUT_FUSION_BUFFER");
  CopyOutOfFusionBuffer(*layout, fused, outputs);
  return Status::Ok();
}

Status CpuExecutor::Reducescatter(const Response& response,
                                  const std::vector<TensorEntry*>& entries,
                                  PhaseObserver* observer) {
  const std::string what = DescribeOp(response.op, entries);
  const int me = plane_.rank();
  if (entries.empty()) return Internal(what + ": no tensors");
  StatusOr<ReducescatterLayout> layout =
      LayOutReducescatter(entries, response.dtype, me, plane_.size());
  if (!layout.ok()) return layout.status().WithContext(what);
  const size_t element_size = DataTypeSize(response.dtype);
  // Over shared memory on one host, hierarchically on several by the allgather's size rule,
  // else a ring; the blocks lie in rank order, or place-major for the hierarchical path
  // (ops/hierarchical_reducescatter.h).
  const Route route{shm_ != nullptr,
                    Hierarchical(response, layout->total_elements() * element_size)};
  const ReducescatterPacking packing =
      ReducescatterPacking::Packed(*layout, route.hierarchical ? &place_major_order_ : nullptr);
  if (shm_ != nullptr && entries.size() == 1 && response.prescale == 1.0 &&
      DisjointOrOwnBlock(*entries[0], packing.total_elements() * element_size,
                         packing.block_offset(me) * element_size)) {
    return ReducescatterStraight(response, *entries[0], layout->block_elements, what, observer);
  }
  return ReducescatterFused(response, entries, *layout, packing, route, what, observer);
}

Status CpuExecutor::ReducescatterStraight(const Response& response, TensorEntry& entry,
                                          const std::vector<size_t>& block_elements,
                                          const std::string& what, PhaseObserver* observer) {
  // The slots read the input where it is (it is rank-major already) and this rank's block is
  // reduced straight into the output: only shared memory can, so this is not a choice of the
  // algorithm list.
  void* output = entry.output.data;
  const size_t count = block_elements[plane_.rank()];
  {
    PhaseScope phase(observer, "SHM_REDUCESCATTER");
    KOLO_RETURN_IF_ERROR(ShmReducescatter(*shm_, entry.input.data, output, block_elements,
                                          response.dtype, SumForAverage(response.reduce_op), what));
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

Status CpuExecutor::ReducescatterFused(const Response& response,
                                       const std::vector<TensorEntry*>& entries,
                                       const ReducescatterLayout& layout,
                                       const ReducescatterPacking& packing, const Route& route,
                                       const std::string& what, PhaseObserver* observer) {
  // Block r holds part r of every tensor, so the collective leaves this rank's parts together.
  // For one tensor in rank order this is just its input, scaled (the input stays untouched).
  const size_t element_size = DataTypeSize(response.dtype);
  const int me = plane_.rank();
  fusion_buffer_.Reserve(packing.total_elements() * element_size);
  uint8_t* work = fusion_buffer_.data();
  {
    PhaseScope phase(observer, "MEMCPY_IN_FUSION_BUFFER");
    for (const ReducescatterPacking::Piece& piece : packing.pieces()) {
      if (piece.elements == 0) continue;
      const auto* input = static_cast<const uint8_t*>(entries[piece.tensor]->input.data);
      ScaleCopy(work + piece.buffer_offset * element_size,
                input + piece.input_offset * element_size, piece.elements, response.dtype,
                response.prescale);
    }
  }
  uint8_t* own = work + packing.block_offset(me) * element_size;
  KOLO_RETURN_IF_ERROR(
      RunFirst(kReducescatterAlgorithms, route, Planes(),
               ReducescatterArgs{work, own, layout.block_elements, response.dtype,
                                 SumForAverage(response.reduce_op), response.reduce_op, what},
               observer));
  PhaseScope phase(observer, "MEMCPY_OUT_FUSION_BUFFER");
  FinishIntegerAverage(response, own, layout.block_elements[me]);
  const double post = PostFactor(response);
  for (size_t t = 0; t < entries.size(); ++t) {
    const ReducescatterPacking::Piece& piece = packing.piece(t, me);
    if (piece.elements > 0) {
      ScaleCopy(entries[t]->output.data, work + piece.buffer_offset * element_size, piece.elements,
                response.dtype, post);
    }
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
  return RunFirst(
      kAlltoallAlgorithms, Route{shm_ != nullptr, false}, Planes(),
      AlltoallArgs{entry.input.data, send, output, recv, response.splits, row_bytes, what},
      observer);
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
