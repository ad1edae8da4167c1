// CpuExecutor: the Executor for host-memory tensors (DESIGN.md §3). Runs each decided allreduce
// response with the ring of ops/ring_allreduce.h over a DataPlane, fusing several tensors
// through one fusion buffer, with prescale/postscale folded into the copies; or, when it was
// given a SharedMemoryPlane (every rank on one host), with ops/shm_allreduce.h straight from
// the tensors through shared memory; broadcast, allgather, reducescatter and alltoall then go
// through shared memory too (ops/shm_broadcast.h, ops/shm_allgather.h, ops/shm_reducescatter.h,
// ops/shm_alltoall.h). Which algorithm moves an op's data is the first of the op's list in
// ops/cpu_algorithms.h that applies; the fused buffers are laid out by core/fusion.
//
// Threading: one thread at a time (like every Executor; core/executor.h). Owns its fusion
// buffer and ring scratch, which it reuses across calls and never shrinks.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/data_plane.h"
#include "core/executor.h"
#include "core/logging.h"
#include "core/op_text.h"
#include "core/shared_memory_plane.h"
#include "ops/aligned_buffer.h"
#include "ops/cpu_algorithms.h"
#include "ops/hierarchical_allreduce.h"
#include "ops/hierarchical_gather.h"
#include "ops/ring_allreduce.h"
#include "ops/shm_allreduce.h"

namespace kolo {
struct ReducescatterLayout;  // core/fusion/fusion_layout.h
class ReducescatterPacking;
}  // namespace kolo

namespace kolo::ops {

class CpuExecutor final : public Executor {
 public:
  // `plane` must outlive the executor. `logger` may be null (then nothing is logged).
  // `scratch_bytes` sizes the ring's receive scratch, allocated here once. `shm` (may be null;
  // else it must outlive the executor and span the same ranks as `plane`) carries allreduces;
  // `single_copy` says from which size they copy straight between the tensors, and in what
  // pieces (ops/shm_single_copy.h).
  CpuExecutor(DataPlane& plane, Logger logger, size_t scratch_bytes = RingScratch::kDefaultBytes,
              SharedMemoryPlane* shm = nullptr,
              const ShmSingleCopy::Tuning& single_copy = ShmSingleCopy::Tuning());

  // Allreduce, allgather and reducescatter (ring), broadcast (pipelined chain from the root;
  // all four hierarchically on several hosts: UseHierarchy),
  // alltoall (pairwise, or through shared memory on one host) and barrier; other ops fail with
  // kInternal "<op> is not implemented". Blocks until the
  // results are in every entry's output. Average divides once by the number of ranks: for
  // floating dtypes folded into the postscale, for integer dtypes together with the postscale
  // after the sum, truncating toward zero (ops/reduce_kernels.h, ScaleDivideInPlace). Integer
  // prescale/postscale truncate as ScaleCopy does; bool must have no average and factors of 1.
  // Phases reported to `observer`: one tensor: COPY_INPUT (input -> output with prescale;
  // skipped in place without prescale), RING_ALLREDUCE, SCALE_OUTPUT (postscale or average;
  // skipped when there is none); fused tensors, reduced in place over their outputs: the same
  // three (COPY_INPUT for the out-of-place ones and the prescale); fused tensors whose memory
  // overlaps: MEMCPY_IN_FUSION_BUFFER, RING_ALLREDUCE, MEMCPY_OUT_FUSION_BUFFER. Over shared
  // memory, one or several tensors: SHM_ALLREDUCE (the copies in and out included).
  // Hierarchically (UseHierarchy): HIERARCHICAL_ALLREDUCE in place of RING_ALLREDUCE.
  Status Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                 PhaseObserver* observer) override;
  // Over shared memory, a small allreduce's input into its slot (ShmAllreduce::Stage); an
  // allreduce whose response says every rank did skips that copy and the first sync.
  std::optional<uint64_t> StageInput(const OpSignature& op, const TensorEntry& entry) override;
  // Allreduces that ran staged so far (ShmAllreduce::staged_ops).
  uint64_t staged_ops() const;

  // Runs allreduces, allgathers and reducescatters of at least `min_bytes` (the fused total,
  // the same on every rank; 0: all; kHierarchyFlat: none; an allreduce response's own
  // hierarchy_min_bytes, when it carries one, instead: core/hierarchy_rule.h), and with
  // `broadcasts` every broadcast, hierarchically (ops/hierarchical_allreduce.h,
  // ops/hierarchical_gather.h, ops/hierarchical_reducescatter.h) instead of over `plane`.
  // `planes`: this host's ranks (`local`), the other hosts' ranks with this rank's place
  // (`cross`), both subsets of the ranks of `plane`, every host with local->size() of them; the
  // host's shared memory (may be null); every rank's place; this rank. All outlive the executor.
  // Not with the constructor's SharedMemoryPlane (whose job is on one host). Phases: as the flat
  // path, with HIERARCHICAL_ALLREDUCE in place of RING_ALLREDUCE (fused tensors always go through
  // the fusion buffer, MEMCPY_IN_FUSION_BUFFER, ..., which the three steps need contiguous),
  // HIERARCHICAL_ALLGATHER in place of RING_ALLGATHER, HIERARCHICAL_REDUCESCATTER in place of
  // RING_REDUCESCATTER, HIERARCHICAL_BROADCAST in place of CHAIN_BROADCAST. Call before the
  // first Execute.
  void UseHierarchy(HostPlanes planes, uint64_t min_bytes, bool broadcasts);

 private:
  Status Allreduce(const Response& response, const std::vector<TensorEntry*>& entries,
                   PhaseObserver* observer);
  // Ring allgather of the ranks' blocks into memory from each entry's allocator: one tensor
  // straight into its output, fused tensors through the fusion buffer (rank r's block holds
  // every tensor's rows from r). An allocator that returns nothing fails that tensor's op on
  // this rank only (entry.local_error); the rank still relays.
  Status Allgather(const Response& response, const std::vector<TensorEntry*>& entries,
                   PhaseObserver* observer);
  // Ring reduce-scatter (on one host ops/shm_reducescatter.h; on several, by the allgather's
  // size rule, ops/hierarchical_reducescatter.h) through the fusion buffer (the inputs stay
  // untouched), laid out so that block r holds part r of every fused tensor (the blocks in
  // place-major order for the hierarchical path); this rank's parts go to the entries'
  // outputs, scaled and averaged as for allreduce. Phases: MEMCPY_IN_FUSION_BUFFER,
  // RING_REDUCESCATTER, SHM_REDUCESCATTER or HIERARCHICAL_REDUCESCATTER,
  // MEMCPY_OUT_FUSION_BUFFER.
  // On one host a lone tensor without prescale skips the fusion buffer (its input is laid out
  // so already): SHM_REDUCESCATTER from its input into its output, then SCALE_OUTPUT where there
  // is a postscale or an integer average.
  Status Reducescatter(const Response& response, const std::vector<TensorEntry*>& entries,
                       PhaseObserver* observer);
  // On one host, a lone tensor without prescale whose output may be written while its input is
  // read: SHM_REDUCESCATTER from the input into the output, then SCALE_OUTPUT.
  Status ReducescatterStraight(const Response& response, TensorEntry& entry,
                               const std::vector<size_t>& block_elements, const std::string& what,
                               PhaseObserver* observer);
  // Through the fusion buffer, packed as `packing` says, by the first algorithm of
  // kReducescatterAlgorithms that applies to `route`.
  Status ReducescatterFused(const Response& response, const std::vector<TensorEntry*>& entries,
                            const ReducescatterLayout& layout, const ReducescatterPacking& packing,
                            const Route& route, const std::string& what, PhaseObserver* observer);
  // Pairwise exchanges of the blocks the split matrix assigns (PAIRWISE_ALLTOALL), or through
  // the SharedMemoryPlane's slots (SHM_ALLTOALL); the output comes from the entry's allocator,
  // as for allgather.
  Status Alltoall(const Response& response, const std::vector<TensorEntry*>& entries,
                  PhaseObserver* observer);
  // Calls the entry's allocator for `shape`; nullptr (with entry.local_error set) if it gave
  // no memory for a non-empty output.
  void* AllocateOutput(TensorEntry& entry, const std::vector<int64_t>& shape,
                       const std::string& what);
  // In place in the single entry's output (the root's input is copied there first). Phases:
  // COPY_INPUT (root, out of place), then CHAIN_BROADCAST or SHM_BROADCAST.
  Status Broadcast(const Response& response, const std::vector<TensorEntry*>& entries,
                   PhaseObserver* observer);
  Status AllreduceOne(const Response& response, TensorEntry& entry, const std::string& what,
                      PhaseObserver* observer, bool hierarchical);
  // In place over the outputs as one segmented buffer when no tensor's memory overlaps
  // another's; through the fusion buffer otherwise.
  Status AllreduceFused(const Response& response, const std::vector<TensorEntry*>& entries,
                        const std::string& what, PhaseObserver* observer);
  Status AllreduceThroughFusionBuffer(const Response& response,
                                      const std::vector<TensorEntry*>& entries,
                                      const std::string& what, PhaseObserver* observer,
                                      bool hierarchical);
  // Whether this op, which moves `bytes` (the fused total, the same on every rank), runs
  // hierarchically (UseHierarchy and its size rule: the response's, else the one UseHierarchy
  // was given).
  bool Hierarchical(const Response& response, uint64_t bytes) const;
  // The reduction proper, in place over `count` elements at `data`: RING_ALLREDUCE over
  // plane_ (DataPlaneAllreduce) or HIERARCHICAL_ALLREDUCE (hierarchical_), by
  // kAllreduceAlgorithms.
  Status ReduceInPlace(const Response& response, void* data, size_t count, const std::string& what,
                       PhaseObserver* observer, bool hierarchical);
  Status AllreduceShm(const Response& response, const std::vector<TensorEntry*>& entries,
                      const std::string& what, PhaseObserver* observer);
  // A fast-path allreduce whose every rank's inputs came in its round (response.eager_inputs):
  // EAGER_ALLREDUCE, each output reduced from them (ops/eager_allreduce.h), no data plane.
  Status AllreduceEager(const Response& response, const std::vector<TensorEntry*>& entries,
                        const std::string& what, PhaseObserver* observer);
  // The scaling of the shared-memory and eager paths: the prescale, the postscale with the
  // average folded in, an integer average's divisor.
  ReduceScaling ScalingOf(const Response& response) const;
  // What the algorithm lists (ops/cpu_algorithms.h) run over: this executor's planes.
  CpuPlanes Planes();
  // The factor applied after the reduction (postscale, with 1/size for floating average; 1 for
  // integer average, whose postscale FinishIntegerAverage applies).
  double PostFactor(const Response& response) const;
  // Integer averages: multiplies by the postscale and divides by the number of ranks, in one
  // rounding; no-op otherwise.
  void FinishIntegerAverage(const Response& response, void* data, size_t count) const;

  // Constant after construction.
  DataPlane& plane_;
  SharedMemoryPlane* const shm_;  // null: everything over plane_
  const Logger logger_;
  // Set once by UseHierarchy, before the first Execute; null: every op over plane_.
  std::unique_ptr<HierarchicalAllreduce> hierarchical_;
  HostPlanes host_planes_;              // for allgather, reducescatter and broadcast
  std::vector<int> place_major_order_;  // PlaceMajorOrder(host_planes_): reducescatter's blocks
  bool hierarchical_broadcasts_ = false;
  uint64_t hierarchy_min_bytes_ = 0;  // for responses that carry no rule of their own
  // Background thread only.
  RingScratch scratch_;
  AlignedBuffer fusion_buffer_;
  std::unique_ptr<ShmAllreduce> shm_allreduce_;  // null without a SharedMemoryPlane
  std::vector<ReduceSpan> spans_;                // reused by every shared-memory allreduce
  std::vector<const void*> eager_inputs_;        // reused by every eager allreduce
  std::string what_;  // Allreduce's name of its op (DescribeOp), its buffer reused
};

}  // namespace kolo::ops
