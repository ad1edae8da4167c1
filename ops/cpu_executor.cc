#include "ops/cpu_executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/op_validation.h"
#include "ops/data_plane_allreduce.h"
#include "ops/eager_allreduce.h"
#include "ops/hierarchical_reducescatter.h"
#include "ops/phase_scope.h"
#include "ops/reduce_kernels.h"

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
  if (response.dtype == DataType::kBool && (response.prescale != 1.0 || response.postscale != 1.0 ||
                                            response.reduce_op == ReduceOp::kAverage)) {
    return InvalidArgument(what + ": bool tensors have no average and cannot be scaled");
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry& entry = *entries[i];
    // For an error only: this runs for every op.
    auto tensor = [&entry] { return "'" + entry.meta.name + "'"; };
    if (entry.input.dtype != response.dtype || entry.output.dtype != response.dtype) {
      return Internal(what + ": tensor " + tensor() + " is not " + DataTypeName(response.dtype));
    }
    if (!entry.input.device.is_cpu() || !entry.output.device.is_cpu()) {
      return Internal(what + ": tensor " + tensor() + " is not in host memory");
    }
    const int64_t count = entry.output.num_elements();
    if (entry.input.num_elements() != count ||
        (i < response.num_elements.size() && response.num_elements[i] != count)) {
      return Internal(what + ": tensor " + tensor() + " has a different element count than its " +
                      "input or the response");
    }
    if (count > 0 && (entry.input.data == nullptr || entry.output.data == nullptr)) {
      return Internal(what + ": tensor " + tensor() + " has no data");
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

}  // namespace

CpuExecutor::CpuExecutor(DataPlane& plane, Logger logger, size_t scratch_bytes,
                         SharedMemoryPlane* shm, const ShmSingleCopy::Tuning& single_copy)
    : plane_(plane), shm_(shm), logger_(std::move(logger)), scratch_(scratch_bytes) {
  if (shm != nullptr) shm_allreduce_ = std::make_unique<ShmAllreduce>(*shm, single_copy);
}

void CpuExecutor::UseHierarchy(HostPlanes planes, uint64_t min_bytes, bool broadcasts) {
  hierarchical_ =
      std::make_unique<HierarchicalAllreduce>(*planes.local, *planes.cross, planes.local_shm);
  host_planes_ = std::move(planes);
  place_major_order_ = PlaceMajorOrder(host_planes_);
  hierarchy_min_bytes_ = min_bytes;
  hierarchical_broadcasts_ = broadcasts;
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

std::optional<uint64_t> CpuExecutor::StageInput(const OpSignature& op, const TensorEntry& entry) {
  if (shm_allreduce_ == nullptr || op.op != OpType::kAllreduce || op.process_set != 0 ||
      !entry.input.device.is_cpu() || entry.input.dtype != op.dtype) {
    return std::nullopt;
  }
  return shm_allreduce_->Stage(entry.input.data, ElementCount(entry), op.dtype, op.prescale);
}

uint64_t CpuExecutor::staged_ops() const {
  return shm_allreduce_ != nullptr ? shm_allreduce_->staged_ops() : 0;
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
  const std::string from = what + " from rank " + std::to_string(response.root);
  const Route route{shm_ != nullptr, hierarchical_ != nullptr && hierarchical_broadcasts_};
  return RunFirst(kBroadcastAlgorithms, route, Planes(),
                  BroadcastArgs{entry.output.data, bytes, response.root, from}, observer);
}

Status CpuExecutor::Allreduce(const Response& response, const std::vector<TensorEntry*>& entries,
                              PhaseObserver* observer) {
  DescribeOp(response.op, entries, &what_);  // its buffer reused: no allocation per op
  const std::string& what = what_;
  KOLO_RETURN_IF_ERROR(CheckEntries(response, entries, what));
  size_t count = 0;  // from the entries, which CheckEntries matched against the response
  for (const TensorEntry* entry : entries) count += ElementCount(*entry);
  const bool hierarchical =
      shm_allreduce_ == nullptr && Hierarchical(response, count * DataTypeSize(response.dtype));
  if (logger_ != nullptr && logger_->should_log(spdlog::level::debug)) {
    logger_->debug("seq {}: {} ({}) over {} ranks{}", response.seq, what,
                   ReduceOpName(response.reduce_op), plane_.size(),
                   hierarchical
                       ? ", hierarchical: " + std::to_string(hierarchical_->hosts()) +
                             " hosts of " + std::to_string(hierarchical_->ranks_per_host()) +
                             (hierarchical_->over_shared_memory() ? " (shm)" : " (tcp)")
                       : "");
  }
  if (!response.eager_inputs.empty()) return AllreduceEager(response, entries, what, observer);
  if (shm_allreduce_ != nullptr) return AllreduceShm(response, entries, what, observer);
  if (entries.size() == 1) return AllreduceOne(response, *entries[0], what, observer, hierarchical);
  if (hierarchical) {  // the three steps need one contiguous buffer
    return AllreduceThroughFusionBuffer(response, entries, what, observer, true);
  }
  return AllreduceFused(response, entries, what, observer);
}

bool CpuExecutor::Hierarchical(const Response& response, uint64_t bytes) const {
  if (hierarchical_ == nullptr) return false;
  return bytes >= response.hierarchy_min_bytes.value_or(hierarchy_min_bytes_);
}

Status CpuExecutor::ReduceInPlace(const Response& response, void* data, size_t count,
                                  const std::string& what, PhaseObserver* observer,
                                  bool hierarchical) {
  return RunFirst(kAllreduceAlgorithms, Route{shm_ != nullptr, hierarchical}, Planes(),
                  AllreduceArgs{data, count, response.dtype, response.reduce_op, what}, observer);
}

CpuPlanes CpuExecutor::Planes() {
  return CpuPlanes{&plane_, shm_, hierarchical_ != nullptr ? &host_planes_ : nullptr,
                   hierarchical_.get(), &scratch_};
}

Status CpuExecutor::AllreduceShm(const Response& response, const std::vector<TensorEntry*>& entries,
                                 const std::string& what, PhaseObserver* observer) {
  spans_.clear();
  for (const TensorEntry* entry : entries) {
    spans_.push_back({entry->input.data, entry->output.data, ElementCount(*entry)});
  }
  PhaseScope phase(observer, "SHM_ALLREDUCE");
  return shm_allreduce_->Run(spans_, response.dtype, response.reduce_op, ScalingOf(response), what,
                             entries.size() == 1 ? response.staged : std::nullopt);
}

ReduceScaling CpuExecutor::ScalingOf(const Response& response) const {
  ReduceScaling scaling;
  scaling.prescale = response.prescale;
  scaling.postscale = PostFactor(response);
  if (response.reduce_op == ReduceOp::kAverage && !IsFloatingPoint(response.dtype)) {
    scaling.postscale = response.postscale;  // applied with the division, in one rounding
    scaling.divisor = plane_.size();
  }
  return scaling;
}

Status CpuExecutor::AllreduceEager(const Response& response,
                                   const std::vector<TensorEntry*>& entries,
                                   const std::string& what, PhaseObserver* observer) {
  const int ranks = plane_.size();
  if (response.eager_inputs.size() != entries.size() * static_cast<size_t>(ranks)) {
    return Internal(what + ": " + std::to_string(response.eager_inputs.size()) +
                    " eager inputs for " + std::to_string(entries.size()) + " tensors of " +
                    std::to_string(ranks) + " ranks");
  }
  const ReduceScaling scaling = ScalingOf(response);
  const size_t element_size = DataTypeSize(response.dtype);
  PhaseScope phase(observer, "EAGER_ALLREDUCE");
  for (size_t t = 0; t < entries.size(); ++t) {
    const size_t bytes = ElementCount(*entries[t]) * element_size;
    auto* output = static_cast<uint8_t*>(entries[t]->output.data);
    // This rank's own input is its entry's (core/round_lane.h, RoundEager): in place, it is
    // copied aside before the output is written over it. The buffer's first half is the
    // prescale's scratch.
    fusion_buffer_.Reserve(2 * bytes);
    eager_inputs_.assign(response.eager_inputs.begin() + static_cast<ptrdiff_t>(t * ranks),
                         response.eager_inputs.begin() + static_cast<ptrdiff_t>((t + 1) * ranks));
    for (const void*& input : eager_inputs_) {
      const auto* in = static_cast<const uint8_t*>(input);
      if (in < output + bytes && output < in + bytes) {
        std::memcpy(fusion_buffer_.data() + bytes, in, bytes);
        input = fusion_buffer_.data() + bytes;
      }
    }
    ReduceEager(eager_inputs_.data(), ranks, output, bytes / element_size, response.dtype,
                response.reduce_op, scaling, fusion_buffer_.data());
  }
  return Status::Ok();
}

Status CpuExecutor::AllreduceOne(const Response& response, TensorEntry& entry,
                                 const std::string& what, PhaseObserver* observer,
                                 bool hierarchical) {
  const size_t count = ElementCount(entry);
  void* output = entry.output.data;
  if (output != entry.input.data || response.prescale != 1.0) {
    PhaseScope phase(observer, "COPY_INPUT");
    ScaleCopy(output, entry.input.data, count, response.dtype, response.prescale);
  }
  KOLO_RETURN_IF_ERROR(ReduceInPlace(response, output, count, what, observer, hierarchical));
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
    return AllreduceThroughFusionBuffer(response, entries, what, observer, false);
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
    KOLO_RETURN_IF_ERROR(DataPlaneAllreduce(plane_, SegmentedBuffer(pieces), response.dtype,
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
                                                 const std::string& what, PhaseObserver* observer,
                                                 bool hierarchical) {
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
  KOLO_RETURN_IF_ERROR(ReduceInPlace(response, fused, total, what, observer, hierarchical));
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
  if (response.reduce_op != ReduceOp::kAverage) return response.postscale;
  // Integer averages take their postscale in FinishIntegerAverage, with the division.
  if (!IsFloatingPoint(response.dtype)) return 1.0;
  return response.postscale / static_cast<double>(plane_.size());
}

void CpuExecutor::FinishIntegerAverage(const Response& response, void* data, size_t count) const {
  if (response.reduce_op == ReduceOp::kAverage && !IsFloatingPoint(response.dtype)) {
    ScaleDivideInPlace(data, count, response.dtype, response.postscale, plane_.size());
  }
}

}  // namespace kolo::ops
