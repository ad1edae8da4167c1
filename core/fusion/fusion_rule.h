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

// What tensors must agree on to share a response: their signature (core/op_signature.h: op,
// dtype, process set, and for the reducing ops the reduction) and whether they are on CPU or GPU.
// Of() leaves out of the signature what fusion ignores, the root (no op that has one fuses) and
// an allgather's reduction (it reduces nothing), so two keys agree when their signatures are equal.
struct FusionKey : OpSignature {
  Device device;

  static FusionKey Of(const TensorMeta& meta) { return Of(meta, meta.device); }
  static FusionKey Of(const OpSignature& signature, Device device);
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
