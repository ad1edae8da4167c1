// FusionRule: which tensors may share one fused transfer, and up to how many bytes (DESIGN.md
// §2, "Fusion"). The one rule for both places that cut responses: the controller's planner
// (controller/fusion_planner.cc) and the fast path's rounds (core/loop/fast_path.cc), so a tensor
// fuses the same way whichever path it takes. A tensor counts for the bytes it takes in the
// executors' fusion buffers (FusionBytes; the layouts are core/fusion/fusion_layout.h), so the
// threshold the responses are cut under and the buffers the executors size by it agree.
//
// Pure functions and a value type; no threads, no I/O.
#pragma once

#include <cstdint>
#include <vector>

#include "core/messages.h"

namespace kolo {

// What tensors must agree on to share a response: process set, op, dtype and device, and for the
// reducing ops the reduction (an allgather reduces nothing, so only its dtype and device count).
struct FusionKey {
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  Device device;
  ReduceOp reduce_op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  int process_set = 0;  // tensors of different process sets never fuse

  static FusionKey Of(const TensorMeta& meta);
};
bool SameFusionKey(const FusionKey& a, const FusionKey& b);

// Bytes `meta`'s tensor holds: its elements times its dtype's size.
int64_t TensorBytes(const TensorMeta& meta);

// Bytes a tensor takes in a fusion buffer: an allreduce's or reducescatter's whole tensor, an
// allgather's gathered output (`first_dims`: every rank's dimension 0, by rank; the layout's
// total, AllgatherLayout::total_bytes, for the tensors of one response).
int64_t FusionBytes(const TensorMeta& meta, const std::vector<int64_t>& first_dims);

// Ops whose tensors may share a fusion buffer: their per-tensor results do not depend on where
// in the buffer a tensor sits. Broadcast (one root per tensor), alltoall (a split matrix per
// tensor), barrier and join never fuse.
bool IsFusibleOp(OpType op);

// One fused response being cut from an ordered list of tensors: the first tensor always joins
// (one bigger than the threshold goes alone); each later one joins while it has the first's key
// and the response's bytes stay <= the threshold. Fusion never reorders: the caller starts a
// new batch at the first tensor that is not admitted.
class FusionBatch {
 public:
  // `threshold_bytes` < 0 counts as 0: no two non-empty tensors fuse.
  explicit FusionBatch(int64_t threshold_bytes)
      : threshold_(threshold_bytes < 0 ? 0 : threshold_bytes) {}

  bool empty() const { return count_ == 0; }
  int64_t bytes() const { return bytes_; }

  // Whether a tensor with `key` occupying `bytes` of the fusion buffer may join.
  bool Admits(const FusionKey& key, int64_t bytes) const;
  // Adds it (whether or not Admits said so: a grouped allreduce joins whatever its size).
  void Add(const FusionKey& key, int64_t bytes);

 private:
  const int64_t threshold_;
  FusionKey key_;
  int64_t bytes_ = 0;
  int count_ = 0;
};

}  // namespace kolo
