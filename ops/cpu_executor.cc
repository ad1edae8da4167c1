#include "ops/cpu_executor.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/op_validation.h"
#include "ops/chain_broadcast.h"
#include "ops/pairwise_alltoall.h"
#include "ops/reduce_kernels.h"
#include "ops/ring_allgather.h"
#include "ops/ring_reducescatter.h"
#include "ops/shm_broadcast.h"

namespace kolo::ops {
namespace {

size_t ElementCount(const TensorEntry& entry) {
  return static_cast<size_t>(entry.output.num_elements());
}

// Checks what the background loop hands us against the response. Failing here means a bug
// upstream (the controller or the queue), reported instead of corrupting memory.
Status CheckEntries(const Response& response, const std::vector<TensorEntry*>& entries,
                    const std::string& what) {
  if (entries.empty() || entries.size() != response.names.size()) {
    return Internal(what + ": " + std::to_string(entries.size()) + " entries for a response of " +
                    std::to_string(response.names.size()) + " tensors");
  }
  if (DataTypeSize(response.dtype) == 0 ||
      !IsValidReduceOp(static_cast<int32_t>(response.reduce_op))) {
    return Internal(what + ": unsupported " + DataTypeName(response.dtype) + " " +
                    ReduceOpName(response.reduce_op));
  }
  if (!IsFloatingPoint(response.dtype) && (response.prescale != 1.0 || response.postscale != 1.0)) {
    return InvalidArgument(what + ": scale factors other than 1 need a floating-point dtype, not " +
                           DataTypeName(response.dtype));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry& entry = *entries[i];
    const std::string tensor = "'" + entry.meta.name + "'";
    if (entry.input.dtype != response.dtype || entry.output.dtype != response.dtype) {
      return Internal(what + ": tensor " + tensor + " is not " + DataTypeName(response.dtype));
    }
    if (!entry.input.device.is_cpu() || !entry.output.device.is_cpu()) {
      return Internal(what + ": tensor " + tensor + " is not in host memory");
    }
    const int64_t count = entry.output.num_elements();
    if (entry.input.num_elements() != count ||
        (i < response.num_elements.size() && response.num_elements[i] != count)) {
      return Internal(what + ": tensor " + tensor + " has a different element count than its " +
                      "input or the response");
    }
    if (count > 0 && (entry.input.data == nullptr || entry.output.data == nullptr)) {
      return Internal(what + ": tensor " + tensor + " has no data");
    }
  }
  return Status::Ok();
}

// Whether the fused tensors' memory can be reduced in place: no output overlaps another
// tensor's output or input (a tensor's own input may be its output). Otherwise the fusion
// buffer keeps each tensor's input intact until every input has been read.
bool DisjointMemory(const std::vector<TensorEntry*>& entries) {
  struct Range {
    uintptr_t begin, end;
    size_t owner;
    bool output;
  };
  std::vector<Range> ranges;
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry& e = *entries[i];
    const size_t bytes = e.output.num_bytes();
    if (bytes == 0) continue;
    const auto out = reinterpret_cast<uintptr_t>(e.output.data);
    ranges.push_back({out, out + bytes, i, true});
    const auto in = reinterpret_cast<uintptr_t>(e.input.data);
    if (in != out) ranges.push_back({in, in + bytes, i, false});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    const Range& prev = ranges[i - 1];
    const Range& next = ranges[i];
    // Two inputs may overlap (both only read); anything else that overlaps may not.
    if (next.begin < prev.end && (prev.output || next.output)) return false;
  }
  return true;
}

// Reports the phase it spans to `observer` (if any) when it goes out of scope.
class PhaseScope {
 public:
  PhaseScope(PhaseObserver* observer, const char* name)
      : observer_(observer), name_(name), start_(Now()) {}
  ~PhaseScope() {
    if (observer_ != nullptr) observer_->OnPhase(name_, start_, Now());
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Clock::TimePoint Now() const {
    return observer_ != nullptr ? SteadyClock::Get()->Now() : Clock::TimePoint();
  }
  PhaseObserver* const observer_;
  const char* const name_;
  const Clock::TimePoint start_;
};

}  // namespace

CpuExecutor::CpuExecutor(DataPlane& plane, Logger logger, size_t scratch_bytes,
                         SharedMemoryPlane* shm)
    : plane_(plane), shm_(shm), logger_(std::move(logger)), scratch_(scratch_bytes) {
  if (shm != nullptr) shm_allreduce_ = std::make_unique<ShmAllreduce>(*shm);
}

Status CpuExecutor::Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                            PhaseObserver* observer) {
  switch (response.op) {
    case OpType::kAllreduce:
      return Allreduce(response, entries, observer);
    case OpType::kBroadcast:
      return Broadcast(response, entries, observer);
    case OpType::kAllgather:
      return Allgather(response, entries, observer);
    case OpType::kReducescatter:
      return Reducescatter(response, entries, observer);
    case OpType::kAlltoall:
      return Alltoall(response, entries, observer);
    case OpType::kBarrier:
    case OpType::kJoin:
      // The decision itself is the barrier (or the end of the join): the controller sends it
      // only once every rank has announced it, so there is nothing left to move.
      return Status::Ok();
    default:
      return Internal(OpTypeName(response.op) + " is not implemented");
  }
}

Status CpuExecutor::Allgather(const Response& response, const std::vector<TensorEntry*>& entries,
                              PhaseObserver* observer) {
  const std::string what = DescribeOp(response.op, entries);
  const int n = plane_.size();
  const int me = plane_.rank();
  const size_t tensors = entries.size();
  if (tensors == 0 || response.first_dims.size() != tensors * n) {
    return Internal(what + ": expected " + std::to_string(n) + " first dimensions for each of " +
                    std::to_string(tensors) + " tensors, got " +
                    std::to_string(response.first_dims.size()));
  }
  auto rows = [&](size_t t, int r) { return response.first_dims[t * n + r]; };
  // rank_bytes[t * n + r]: bytes of tensor t's rows from rank r; a rank may send zero rows.
  std::vector<size_t> rank_bytes(tensors * n);
  std::vector<size_t> block_bytes(n, 0);  // every tensor's rows from rank r, back to back
  std::vector<void*> outputs(tensors);
  for (size_t t = 0; t < tensors; ++t) {
    TensorEntry& entry = *entries[t];
    const std::vector<int64_t>& in_shape = entry.input.shape;
    if (in_shape.empty() || in_shape[0] != rows(t, me) || entry.input.dtype != response.dtype) {
      return Internal(what + ": this rank's input '" + entry.meta.name +
                      "' does not match the decision");
    }
    size_t row_bytes = DataTypeSize(response.dtype);
    for (size_t d = 1; d < in_shape.size(); ++d) row_bytes *= static_cast<size_t>(in_shape[d]);
    std::vector<int64_t> out_shape = in_shape;
    out_shape[0] = 0;
    for (int r = 0; r < n; ++r) {
      rank_bytes[t * n + r] = static_cast<size_t>(rows(t, r)) * row_bytes;
      block_bytes[r] += rank_bytes[t * n + r];
      out_shape[0] += rows(t, r);
    }
    // nullptr: the allocator failed; this rank still relays, only that tensor's op fails.
    outputs[t] = AllocateOutput(entry, out_shape, what);
  }
  size_t total = 0, own_offset = 0;
  for (int r = 0; r < n; ++r) {
    if (r == me) own_offset = total;
    total += block_bytes[r];
  }
  if (tensors == 1 && outputs[0] != nullptr) {
    // Gather straight into the output: its layout is the ring's.
    uint8_t* output = static_cast<uint8_t*>(outputs[0]);
    {
      PhaseScope phase(observer, "COPY_INPUT");
      if (block_bytes[me] > 0)
        std::memcpy(output + own_offset, entries[0]->input.data, block_bytes[me]);
    }
    PhaseScope phase(observer, "RING_ALLGATHER");
    return RingAllgather(plane_, output, block_bytes, what);
  }
  // Through the fusion buffer, rank-major: rank r's block holds every tensor's rows from r.
  fusion_buffer_.Reserve(total);
  uint8_t* fused = fusion_buffer_.data();
  {
    PhaseScope phase(observer, "MEMCPY_IN_FUSION_BUFFER");
    size_t offset = own_offset;
    for (size_t t = 0; t < tensors; ++t) {
      const size_t bytes = rank_bytes[t * n + me];
      if (bytes > 0) std::memcpy(fused + offset, entries[t]->input.data, bytes);
      offset += bytes;
    }
  }
  {
    PhaseScope phase(observer, "RING_ALLGATHER");
    KOLO_RETURN_IF_ERROR(RingAllgather(plane_, fused, block_bytes, what));
  }
  PhaseScope phase(observer, "MEMCPY_OUT_FUSION_BUFFER");
  size_t block_start = 0;
  std::vector<size_t> out_offset(tensors, 0);
  for (int r = 0; r < n; ++r) {
    size_t offset = block_start;
    for (size_t t = 0; t < tensors; ++t) {
      const size_t bytes = rank_bytes[t * n + r];
      if (outputs[t] != nullptr && bytes > 0) {
        std::memcpy(static_cast<uint8_t*>(outputs[t]) + out_offset[t], fused + offset, bytes);
      }
      out_offset[t] += bytes;
      offset += bytes;
    }
    block_start += block_bytes[r];
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
  // parts[t * n + r]: elements of tensor t that rank r receives (whole rows, SplitRows).
  std::vector<size_t> parts(tensors * n);
  std::vector<size_t> block_elements(n, 0);
  for (size_t t = 0; t < tensors; ++t) {
    TensorEntry& entry = *entries[t];
    const std::vector<int64_t>& shape = entry.input.shape;
    const int64_t rows = shape.empty() ? 1 : shape[0];
    const int64_t row_elements = rows == 0 ? 0 : entry.input.num_elements() / rows;
    const std::vector<int64_t> split = SplitRows(rows, n);
    for (int r = 0; r < n; ++r) {
      parts[t * n + r] = static_cast<size_t>(split[r] * row_elements);
      block_elements[r] += parts[t * n + r];
    }
    if (entry.output.num_elements() != static_cast<int64_t>(parts[t * n + me]) ||
        entry.input.dtype != response.dtype) {
      return Internal(what + ": the output of '" + entry.meta.name +
                      "' does not match this rank's part");
    }
  }
  size_t total = 0, own_offset = 0;
  for (int r = 0; r < n; ++r) {
    if (r == me) own_offset = total;
    total += block_elements[r];
  }
  // Rank-major: block r holds part r of every tensor, so the ring leaves this rank's parts
  // together. For one tensor this is just its input, scaled (the input stays untouched).
  fusion_buffer_.Reserve(total * element_size);
  uint8_t* work = fusion_buffer_.data();
  {
    PhaseScope phase(observer, "MEMCPY_IN_FUSION_BUFFER");
    std::vector<size_t> in_offset(tensors, 0);  // elements of tensor t already placed
    size_t offset = 0;
    for (int r = 0; r < n; ++r) {
      for (size_t t = 0; t < tensors; ++t) {
        const size_t count = parts[t * n + r];
        const uint8_t* input = static_cast<const uint8_t*>(entries[t]->input.data);
        if (count > 0) {
          ScaleCopy(work + offset * element_size, input + in_offset[t] * element_size, count,
                    response.dtype, response.prescale);
        }
        in_offset[t] += count;
        offset += count;
      }
    }
  }
  {
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

Status CpuExecutor::Broadcast(const Response& response, const std::vector<TensorEntry*>& entries,
                              PhaseObserver* observer) {
  const std::string what = DescribeOp(response.op, entries);
  KOLO_RETURN_IF_ERROR(CheckEntries(response, entries, what));
  if (entries.size() != 1) {
    return Internal(what + ": a broadcast is never fused, got " + std::to_string(entries.size()) +
                    " tensors");
  }
  if (response.root < 0 || response.root >= plane_.size()) {
    return Internal(what + ": root rank " + std::to_string(response.root) + " is out of range");
  }
  TensorEntry& entry = *entries[0];
  const size_t bytes = entry.output.num_bytes();
  if (plane_.rank() == response.root && entry.output.data != entry.input.data) {
    PhaseScope phase(observer, "COPY_INPUT");
    std::memcpy(entry.output.data, entry.input.data, bytes);
  }
  if (shm_ != nullptr) {
    PhaseScope phase(observer, "SHM_BROADCAST");
    return ShmBroadcast(*shm_, entry.output.data, bytes, response.root,
                        what + " from rank " + std::to_string(response.root));
  }
  PhaseScope phase(observer, "CHAIN_BROADCAST");
  return ChainBroadcast(plane_, entry.output.data, bytes, response.root,
                        what + " from rank " + std::to_string(response.root));
}

Status CpuExecutor::Allreduce(const Response& response, const std::vector<TensorEntry*>& entries,
                              PhaseObserver* observer) {
  const std::string what = DescribeOp(response.op, entries);
  KOLO_RETURN_IF_ERROR(CheckEntries(response, entries, what));
  if (logger_ != nullptr) {
    logger_->debug("seq {}: {} ({}) over {} ranks", response.seq, what,
                   ReduceOpName(response.reduce_op), plane_.size());
  }
  if (shm_allreduce_ != nullptr) return AllreduceShm(response, entries, what, observer);
  if (entries.size() == 1) return AllreduceOne(response, *entries[0], what, observer);
  return AllreduceFused(response, entries, what, observer);
}

Status CpuExecutor::AllreduceShm(const Response& response, const std::vector<TensorEntry*>& entries,
                                 const std::string& what, PhaseObserver* observer) {
  spans_.clear();
  for (const TensorEntry* entry : entries) {
    spans_.push_back({entry->input.data, entry->output.data, ElementCount(*entry)});
  }
  ReduceScaling scaling;
  scaling.prescale = response.prescale;
  scaling.postscale = PostFactor(response);
  if (response.reduce_op == ReduceOp::kAverage && !IsFloatingPoint(response.dtype)) {
    scaling.divisor = plane_.size();
  }
  PhaseScope phase(observer, "SHM_ALLREDUCE");
  return shm_allreduce_->Run(spans_, response.dtype, response.reduce_op, scaling, what);
}

Status CpuExecutor::AllreduceOne(const Response& response, TensorEntry& entry,
                                 const std::string& what, PhaseObserver* observer) {
  const size_t count = ElementCount(entry);
  void* output = entry.output.data;
  if (output != entry.input.data || response.prescale != 1.0) {
    PhaseScope phase(observer, "COPY_INPUT");
    ScaleCopy(output, entry.input.data, count, response.dtype, response.prescale);
  }
  {
    PhaseScope phase(observer, "RING_ALLREDUCE");
    KOLO_RETURN_IF_ERROR(
        RingAllreduce(plane_, output, count, response.dtype, response.reduce_op, scratch_, what));
  }
  const double post = PostFactor(response);
  if (post != 1.0 ||
      (response.reduce_op == ReduceOp::kAverage && !IsFloatingPoint(response.dtype))) {
    PhaseScope phase(observer, "SCALE_OUTPUT");
    ScaleCopy(output, output, count, response.dtype, post);
    FinishIntegerAverage(response, output, count);
  }
  return Status::Ok();
}

Status CpuExecutor::AllreduceFused(const Response& response,
                                   const std::vector<TensorEntry*>& entries,
                                   const std::string& what, PhaseObserver* observer) {
  if (!DisjointMemory(entries))
    return AllreduceThroughFusionBuffer(response, entries, what, observer);
  // In place over the outputs: the ring takes them as one buffer, so nothing is copied but the
  // inputs of out-of-place tensors (with the prescale) and the postscale.
  const size_t element_size = DataTypeSize(response.dtype);
  std::vector<BytePiece> pieces;
  {
    PhaseScope phase(observer, "COPY_INPUT");
    for (const TensorEntry* entry : entries) {
      const size_t count = ElementCount(*entry);
      if (entry->output.data != entry->input.data || response.prescale != 1.0) {
        ScaleCopy(entry->output.data, entry->input.data, count, response.dtype, response.prescale);
      }
      pieces.push_back({static_cast<uint8_t*>(entry->output.data), count * element_size});
    }
  }
  {
    PhaseScope phase(observer, "RING_ALLREDUCE");
    KOLO_RETURN_IF_ERROR(RingAllreduce(plane_, SegmentedBuffer(pieces), response.dtype,
                                       response.reduce_op, scratch_, what));
  }
  const double post = PostFactor(response);
  if (post == 1.0 &&
      !(response.reduce_op == ReduceOp::kAverage && !IsFloatingPoint(response.dtype))) {
    return Status::Ok();
  }
  PhaseScope phase(observer, "SCALE_OUTPUT");
  for (const TensorEntry* entry : entries) {
    const size_t count = ElementCount(*entry);
    FinishIntegerAverage(response, entry->output.data, count);
    ScaleCopy(entry->output.data, entry->output.data, count, response.dtype, post);
  }
  return Status::Ok();
}

Status CpuExecutor::AllreduceThroughFusionBuffer(const Response& response,
                                                 const std::vector<TensorEntry*>& entries,
                                                 const std::string& what, PhaseObserver* observer) {
  const size_t element_size = DataTypeSize(response.dtype);
  size_t total = 0;
  for (const TensorEntry* entry : entries) total += ElementCount(*entry);
  fusion_buffer_.Reserve(total * element_size);
  uint8_t* fused = fusion_buffer_.data();
  {
    PhaseScope phase(observer, "MEMCPY_IN_FUSION_BUFFER");
    size_t offset = 0;
    for (const TensorEntry* entry : entries) {
      const size_t count = ElementCount(*entry);
      ScaleCopy(fused + offset, entry->input.data, count, response.dtype, response.prescale);
      offset += count * element_size;
    }
  }
  {
    PhaseScope phase(observer, "RING_ALLREDUCE");
    KOLO_RETURN_IF_ERROR(
        RingAllreduce(plane_, fused, total, response.dtype, response.reduce_op, scratch_, what));
  }
  PhaseScope phase(observer, "MEMCPY_OUT_FUSION_BUFFER");
  FinishIntegerAverage(response, fused, total);
  const double post = PostFactor(response);
  size_t offset = 0;
  for (const TensorEntry* entry : entries) {
    const size_t count = ElementCount(*entry);
    ScaleCopy(entry->output.data, fused + offset, count, response.dtype, post);
    offset += count * element_size;
  }
  return Status::Ok();
}

double CpuExecutor::PostFactor(const Response& response) const {
  if (response.reduce_op == ReduceOp::kAverage && IsFloatingPoint(response.dtype)) {
    return response.postscale / static_cast<double>(plane_.size());
  }
  return response.postscale;
}

void CpuExecutor::FinishIntegerAverage(const Response& response, void* data, size_t count) const {
  if (response.reduce_op == ReduceOp::kAverage && !IsFloatingPoint(response.dtype)) {
    DivideInPlace(data, count, response.dtype, plane_.size());
  }
}

std::string DescribeOp(OpType op, const std::vector<TensorEntry*>& entries) {
  std::string text = OpTypeName(op);
  if (entries.empty()) return text;
  constexpr size_t kNamed = 2;  // tensors named before "and N more"
  size_t bytes = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    bytes += entries[i]->output.num_bytes();
    if (i < kNamed) text += std::string(i == 0 ? " '" : ", '") + entries[i]->meta.name + "'";
  }
  if (entries.size() == 1) return text;
  if (entries.size() > kNamed) text += " and " + std::to_string(entries.size() - kNamed) + " more";
  return text + " (" + std::to_string(entries.size()) + " tensors, " + FormatBytes(bytes) + ")";
}

std::string FormatBytes(size_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  return text;
}

}  // namespace kolo::ops
