// GpuExecutor's collectives: what each op kind enqueues on kolo's stream, with the same meaning
// as on the CPU path (ops/cpu_executor.cc, cpu_executor_rows.cc) and the same rank-major
// fusion-buffer layouts (core/fusion/fusion_layout.h). Launch (gpu_executor.cc) adds the op's
// name to every error here.
#include <algorithm>

#include "core/fusion/fusion_layout.h"
#include "core/op_validation.h"
#include "ops/gpu/gpu_executor.h"

namespace kolo::gpu {
namespace {

// The one factor NCCL multiplies by before reducing (gpu_executor.h, "Scaling").
StatusOr<double> FoldedScale(const Response& response) {
  if (response.prescale == 1.0 && response.postscale == 1.0) return 1.0;
  if (!IsFloatingPoint(response.dtype)) {
    return InvalidArgument("scale factors other than 1 need a floating-point dtype, not " +
                           DataTypeName(response.dtype));
  }
  if (response.reduce_op != ReduceOp::kSum && response.reduce_op != ReduceOp::kAverage) {
    return InvalidArgument("scale factors other than 1 with " + ReduceOpName(response.reduce_op) +
                           " are not supported on GPU tensors: NCCL scales only sums and " +
                           "averages (ncclRedOpCreatePreMulSum)");
  }
  return response.prescale * response.postscale;
}

// What the loop hands over against the response; failing means a bug upstream.
Status CheckEntries(const Response& response, const std::vector<TensorEntry*>& entries,
                    bool same_count) {
  if (entries.empty() || entries.size() != response.names.size()) {
    return Internal(std::to_string(entries.size()) + " entries for a response of " +
                    std::to_string(response.names.size()) + " tensors");
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry& e = *entries[i];
    if (e.input.dtype != response.dtype) {
      return Internal("tensor '" + e.meta.name + "' is not " + DataTypeName(response.dtype));
    }
    if (!same_count) continue;
    const int64_t count = e.output.num_elements();
    if (e.output.dtype != response.dtype || e.input.num_elements() != count ||
        (i < response.num_elements.size() && response.num_elements[i] != count)) {
      return Internal("tensor '" + e.meta.name +
                      "' has a different element count or dtype than its input or the response");
    }
  }
  return Status::Ok();
}

size_t RowBytes(const std::vector<int64_t>& shape, DataType dtype) {
  size_t bytes = DataTypeSize(dtype);
  for (size_t d = 1; d < shape.size(); ++d) bytes *= static_cast<size_t>(shape[d]);
  return bytes;
}

}  // namespace

Status GpuExecutor::OnComm(const std::function<Status(CommHandle)>& call) {
  MutexLock lock(&comm_mu_);
  return call(comm_);
}

Status GpuExecutor::Copy(const std::vector<CopySpan>& copies) {
  if (copies.empty()) return Status::Ok();
  return device_->MemcpyBatchAsync(copies, CopyKind::kDeviceToDevice, stream_);
}

Status GpuExecutor::ThroughFusionBuffer(Op& op, const std::vector<CopySpan>& in,
                                        const std::vector<CopySpan>& out, const char* phase,
                                        const std::function<Status()>& collective) {
  KOLO_RETURN_IF_ERROR(Copy(in));
  KOLO_RETURN_IF_ERROR(EndPhase(op, "MEMCPY_IN_FUSION_BUFFER"));
  KOLO_RETURN_IF_ERROR(collective());
  KOLO_RETURN_IF_ERROR(EndPhase(op, phase));
  KOLO_RETURN_IF_ERROR(Copy(out));
  return EndPhase(op, "MEMCPY_OUT_FUSION_BUFFER");
}

Status GpuExecutor::Enqueue(const Response& response, const std::vector<TensorEntry*>& entries,
                            Op& op) {
  switch (response.op) {
    case OpType::kAllreduce:
      return Allreduce(response, entries, op);
    case OpType::kBroadcast:
      return Broadcast(response, entries, op);
    case OpType::kAllgather:
      return Allgather(response, entries, op);
    case OpType::kReducescatter:
      return Reducescatter(response, entries, op);
    case OpType::kAlltoall:
      return Alltoall(response, entries, op);
    case OpType::kBarrier:
    case OpType::kJoin:
      // The decision is the barrier; the op completes in stream order, after the ops before it.
      return Status::Ok();
    default:
      return Internal(OpTypeName(response.op) + " is not implemented on GPU tensors");
  }
}

Status GpuExecutor::Allreduce(const Response& response, const std::vector<TensorEntry*>& entries,
                              Op& op) {
  KOLO_RETURN_IF_ERROR(CheckEntries(response, entries, /*same_count=*/true));
  StatusOr<double> scale = FoldedScale(response);
  if (!scale.ok()) return scale.status();
  const auto all_reduce = [&](const void* send, void* recv, size_t count) {
    if (count == 0) return Status::Ok();  // every rank skips it: the counts are the response's
    return OnComm([&](CommHandle comm) {
      return coll_->AllReduce(send, recv, count, response.dtype, response.reduce_op, *scale, comm,
                              stream_);
    });
  };
  if (entries.size() == 1) {
    // In place on the tensor's own memory (or from its input into its output): no copy.
    const TensorEntry& e = *entries[0];
    KOLO_RETURN_IF_ERROR(
        all_reduce(e.input.data, e.output.data, static_cast<size_t>(e.output.num_elements())));
    return EndPhase(op, "NCCL_ALLREDUCE");
  }
  const size_t element_size = DataTypeSize(response.dtype);
  size_t total = 0;
  for (const TensorEntry* e : entries) total += e->output.num_bytes();
  StatusOr<uint8_t*> fused = Scratch(total, op);
  if (!fused.ok()) return fused.status();
  std::vector<CopySpan> in, out;
  size_t offset = 0;
  for (const TensorEntry* e : entries) {
    const size_t bytes = e->output.num_bytes();
    if (bytes > 0) {
      in.push_back(CopySpan{*fused + offset, e->input.data, bytes});
      out.push_back(CopySpan{e->output.data, *fused + offset, bytes});
    }
    offset += bytes;
  }
  return ThroughFusionBuffer(op, in, out, "NCCL_ALLREDUCE",
                             [&] { return all_reduce(*fused, *fused, total / element_size); });
}

Status GpuExecutor::Broadcast(const Response& response, const std::vector<TensorEntry*>& entries,
                              Op& op) {
  KOLO_RETURN_IF_ERROR(CheckEntries(response, entries, /*same_count=*/true));
  if (entries.size() != 1) {
    return Internal("a broadcast is never fused, got " + std::to_string(entries.size()) +
                    " tensors");
  }
  if (response.root < 0 || response.root >= config_.size) {
    return Internal("root rank " + std::to_string(response.root) + " is out of range");
  }
  const TensorEntry& e = *entries[0];
  const auto count = static_cast<size_t>(e.output.num_elements());
  if (e.output.num_bytes() > 0) {
    KOLO_RETURN_IF_ERROR(OnComm([&](CommHandle comm) {
      return coll_->Broadcast(e.input.data, e.output.data, count, response.dtype, response.root,
                              comm, stream_);
    }));
  }
  return EndPhase(op, "NCCL_BROADCAST");
}

Status GpuExecutor::GatherBlocks(const void* send, uint8_t* blocks,
                                 const std::vector<size_t>& block_bytes, DataType dtype) {
  const size_t element_size = DataTypeSize(dtype);
  const bool even = std::all_of(block_bytes.begin(), block_bytes.end(),
                                [&](size_t b) { return b == block_bytes[0]; });
  return OnComm([&](CommHandle comm) -> Status {
    if (even) {
      if (block_bytes[0] == 0) return Status::Ok();
      return coll_->AllGather(send, blocks, block_bytes[0] / element_size, dtype, comm, stream_);
    }
    // Blocks of different sizes: each rank broadcasts its own into place (as Horovod does).
    size_t offset = 0;
    for (int r = 0; r < config_.size; ++r) {
      const size_t bytes = block_bytes[static_cast<size_t>(r)];
      if (bytes > 0) {
        const void* from = r == config_.rank ? send : blocks + offset;
        KOLO_RETURN_IF_ERROR(
            coll_->Broadcast(from, blocks + offset, bytes / element_size, dtype, r, comm, stream_));
      }
      offset += bytes;
    }
    return Status::Ok();
  });
}

StatusOr<void*> GpuExecutor::AllocateOutput(TensorEntry& entry, const std::vector<int64_t>& shape,
                                            Op& op) {
  void* output = nullptr;
  try {  // user code at a thread boundary
    output = entry.allocate ? entry.allocate(shape) : nullptr;
  } catch (...) {
    output = nullptr;
  }
  const TensorView view{output, entry.input.dtype, shape, entry.input.device};
  if (output == nullptr && view.num_elements() > 0) {
    // This rank still takes part; only this tensor's op fails. Its rows land in scratch.
    entry.local_error =
        InvalidArgument(OpTypeName(entry.meta.op) + " '" + entry.meta.name +
                        "': the output allocator returned no memory for " + ShapeToString(shape));
    StatusOr<void*> scratch = device_->Malloc(view.num_bytes());
    if (!scratch.ok()) return scratch.status();
    op.buffers.push_back(*scratch);
    return *scratch;
  }
  entry.output = view;
  return output;
}

Status GpuExecutor::Allgather(const Response& response, const std::vector<TensorEntry*>& entries,
                              Op& op) {
  KOLO_RETURN_IF_ERROR(CheckEntries(response, entries, /*same_count=*/false));
  KOLO_ASSIGN_OR_RETURN(const AllgatherLayout layout,
                        AllgatherLayout::Of(response, entries, config_.rank, config_.size));
  const size_t tensors = entries.size();
  std::vector<uint8_t*> outputs(tensors);
  for (size_t t = 0; t < tensors; ++t) {
    StatusOr<void*> out = AllocateOutput(*entries[t], layout.output_shape(t), op);
    if (!out.ok()) return out.status();
    outputs[t] = static_cast<uint8_t*>(*out);
  }
  const std::vector<size_t>& block_bytes = layout.block_bytes();
  if (tensors == 1) {
    // Straight into the output: its layout is the gather's.
    KOLO_RETURN_IF_ERROR(
        GatherBlocks(entries[0]->input.data, outputs[0], block_bytes, response.dtype));
    return EndPhase(op, "NCCL_ALLGATHER");
  }
  // Through the fusion buffer (core/fusion/fusion_layout.h).
  StatusOr<uint8_t*> fused = Scratch(layout.total_bytes(), op);
  if (!fused.ok()) return fused.status();
  std::vector<CopySpan> in, out;
  for (size_t t = 0; t < tensors; ++t) {
    const AllgatherLayout::Piece& own = layout.piece(t, config_.rank);
    if (own.bytes > 0)
      in.push_back(CopySpan{*fused + own.buffer_offset, entries[t]->input.data, own.bytes});
  }
  for (int r = 0; r < config_.size; ++r) {
    for (size_t t = 0; t < tensors; ++t) {
      const AllgatherLayout::Piece& piece = layout.piece(t, r);
      if (piece.bytes > 0) {
        out.push_back(
            CopySpan{outputs[t] + piece.output_offset, *fused + piece.buffer_offset, piece.bytes});
      }
    }
  }
  return ThroughFusionBuffer(op, in, out, "NCCL_ALLGATHER", [&] {
    return GatherBlocks(*fused + layout.own_offset(), *fused, block_bytes, response.dtype);
  });
}

Status GpuExecutor::Reducescatter(const Response& response,
                                  const std::vector<TensorEntry*>& entries, Op& op) {
  KOLO_RETURN_IF_ERROR(CheckEntries(response, entries, /*same_count=*/false));
  StatusOr<double> scale = FoldedScale(response);
  if (!scale.ok()) return scale.status();
  const int n = config_.size;
  const int me = config_.rank;
  const size_t tensors = entries.size();
  const size_t element_size = DataTypeSize(response.dtype);
  KOLO_ASSIGN_OR_RETURN(const ReducescatterLayout layout,
                        LayOutReducescatter(entries, response.dtype, me, n));
  const std::vector<size_t>& block_elements = layout.block_elements;
  const size_t block = *std::max_element(block_elements.begin(), block_elements.end());
  const bool even = std::all_of(block_elements.begin(), block_elements.end(),
                                [&](size_t b) { return b == block; });
  const auto reduce_scatter = [&](const void* send, void* recv) {
    if (block == 0) return Status::Ok();
    return OnComm([&](CommHandle comm) {
      return coll_->ReduceScatter(send, recv, block, response.dtype, response.reduce_op, *scale,
                                  comm, stream_);
    });
  };
  if (tensors == 1 && even) {
    KOLO_RETURN_IF_ERROR(reduce_scatter(entries[0]->input.data, entries[0]->output.data));
    return EndPhase(op, "NCCL_REDUCESCATTER");
  }
  // Rank-major, every rank's block padded to the largest (NCCL's blocks are all one size); the
  // padding is zeros, reduced and dropped.
  const ReducescatterPacking packing = ReducescatterPacking::Padded(layout);
  const size_t total_bytes = packing.total_elements() * element_size;
  StatusOr<uint8_t*> work = Scratch(total_bytes, op);
  if (!work.ok()) return work.status();
  if (!even) KOLO_RETURN_IF_ERROR(device_->MemsetAsync(*work, 0, total_bytes, stream_));
  std::vector<CopySpan> in, out;
  for (const ReducescatterPacking::Piece& piece : packing.pieces()) {
    const size_t bytes = piece.elements * element_size;
    if (bytes == 0) continue;
    uint8_t* fused = *work + piece.buffer_offset * element_size;
    const auto* input = static_cast<const uint8_t*>(entries[piece.tensor]->input.data);
    in.push_back(CopySpan{fused, input + piece.input_offset * element_size, bytes});
    if (piece.rank == me) out.push_back(CopySpan{entries[piece.tensor]->output.data, fused, bytes});
  }
  return ThroughFusionBuffer(op, in, out, "NCCL_REDUCESCATTER", [&] {
    return reduce_scatter(*work, *work + packing.block_offset(me) * element_size);  // in place
  });
}

Status GpuExecutor::Alltoall(const Response& response, const std::vector<TensorEntry*>& entries,
                             Op& op) {
  KOLO_RETURN_IF_ERROR(CheckEntries(response, entries, /*same_count=*/false));
  const int n = config_.size;
  const int me = config_.rank;
  if (entries.size() != 1 || response.splits.size() != static_cast<size_t>(n) * n) {
    return Internal("expected one tensor and a " + std::to_string(n) + "x" + std::to_string(n) +
                    " split matrix");
  }
  TensorEntry& e = *entries[0];
  const size_t row_bytes = RowBytes(e.input.shape, response.dtype);
  const size_t element_size = DataTypeSize(response.dtype);
  auto rows = [&](int from, int to) { return static_cast<size_t>(response.splits[from * n + to]); };
  std::vector<int64_t> out_shape = e.input.shape.empty() ? std::vector<int64_t>{0} : e.input.shape;
  out_shape[0] = 0;
  size_t sent = 0;
  for (int peer = 0; peer < n; ++peer) {
    sent += rows(me, peer) * row_bytes;
    out_shape[0] += static_cast<int64_t>(rows(peer, me));
  }
  if (sent != e.input.num_bytes()) {
    return Internal("the split matrix does not cover this rank's input");
  }
  const auto* input = static_cast<const uint8_t*>(e.input.data);
  StatusOr<void*> allocated = AllocateOutput(e, out_shape, op);
  if (!allocated.ok()) return allocated.status();
  auto* output = static_cast<uint8_t*>(*allocated);
  if (e.received_splits != nullptr) {
    e.received_splits->clear();
    for (int peer = 0; peer < n; ++peer) {
      e.received_splits->push_back(static_cast<int64_t>(rows(peer, me)));
    }
  }
  KOLO_RETURN_IF_ERROR(OnComm([&](CommHandle comm) -> Status {
    KOLO_RETURN_IF_ERROR(coll_->GroupStart());
    Status status;
    size_t send_offset = 0, recv_offset = 0;
    for (int peer = 0; peer < n && status.ok(); ++peer) {
      const size_t send_bytes = rows(me, peer) * row_bytes;
      const size_t recv_bytes = rows(peer, me) * row_bytes;
      if (send_bytes > 0) {
        status = coll_->Send(input + send_offset, send_bytes / element_size, response.dtype, peer,
                             comm, stream_);
      }
      if (status.ok() && recv_bytes > 0) {
        status = coll_->Recv(output + recv_offset, recv_bytes / element_size, response.dtype, peer,
                             comm, stream_);
      }
      send_offset += send_bytes;
      recv_offset += recv_bytes;
    }
    const Status ended = coll_->GroupEnd();  // closes the group even after a failure
    return status.ok() ? ended : status;
  }));
  return EndPhase(op, "NCCL_ALLTOALL");
}

}  // namespace kolo::gpu
