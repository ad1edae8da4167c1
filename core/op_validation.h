// Local checks an enqueue makes before an op is queued (DESIGN.md §1): everything that can be
// judged on one rank without the network. Pure functions; thread-safe.
#pragma once

#include <string>

#include "core/messages.h"
#include "kolo/op_args.h"

namespace kolo {

// Checks an allreduce's arguments and returns its metadata. Errors name the tensor and what
// is wrong with it.
StatusOr<TensorMeta> ValidateAllreduce(const std::string& name, const TensorView& input,
                                       const TensorView& output, const AllreduceOptions& options);

// Checks an allgather of `input` (at least one dimension) whose output `allocate` provides.
StatusOr<TensorMeta> ValidateAllgather(const std::string& name, const TensorView& input,
                                       const Allocator& allocate);

// How reducescatter splits `rows` rows (dimension 0) over `n` ranks: rank i gets rows / n, and
// the first rows % n ranks one more (10 rows over 4 ranks: 3, 3, 2, 2).
std::vector<int64_t> SplitRows(int64_t rows, int n);

// Checks a reducescatter of `input` (at least one dimension): `output` must hold this rank's
// part (ReducescatterShape).
StatusOr<TensorMeta> ValidateReducescatter(const std::string& name, const TensorView& input,
                                           const TensorView& output,
                                           const AllreduceOptions& options, int rank, int size);

// Checks an alltoall: `splits` (rows of dimension 0 for each rank; empty: an even split) must
// have one entry per rank, be non-negative and add up to the input's first dimension. Returns
// the metadata with the splits resolved.
StatusOr<TensorMeta> ValidateAlltoall(const std::string& name, const TensorView& input,
                                      const std::vector<int64_t>& splits, const Allocator& allocate,
                                      int size);

// Checks a broadcast of `tensor` (in place) from `root` in a job of `size` ranks.
StatusOr<TensorMeta> ValidateBroadcast(const std::string& name, const TensorView& tensor, int root,
                                       int size);
// Checks an out-of-place broadcast: `input` (read on the root only) and `output` have the same
// dtype, element count and device; the metadata has the output's shape. input.data ==
// output.data is the in-place form.
StatusOr<TensorMeta> ValidateBroadcast(const std::string& name, const TensorView& input,
                                       const TensorView& output, int root, int size);

// The names every rank's barrier and join are negotiated under.
inline constexpr char kBarrierName[] = "kolo.barrier";
inline constexpr char kJoinName[] = "kolo.join";
// The names add_process_set and remove_process_set are negotiated under (global set).
inline constexpr char kAddProcessSetName[] = "kolo.add_process_set";
inline constexpr char kRemoveProcessSetName[] = "kolo.remove_process_set";

// The metadata of a barrier (or, with OpType::kJoin, a join): every rank submits the same
// name with no data.
TensorMeta BarrierMeta(const std::string& name, OpType op = OpType::kBarrier);

}  // namespace kolo
