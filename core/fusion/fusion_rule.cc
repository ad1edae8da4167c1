#include "core/fusion/fusion_rule.h"

namespace kolo {

FusionKey FusionKey::Of(const OpSignature& signature, Device device) {
  FusionKey key;
  key.signature() = signature;
  // What fusion leaves out of the signature: the root (no op that has one fuses) and an
  // allgather's reduction (it reduces nothing).
  key.root = OpSignature().root;
  if (key.op == OpType::kAllgather) {
    key.reduce_op = OpSignature().reduce_op;
    key.prescale = OpSignature().prescale;
    key.postscale = OpSignature().postscale;
  }
  key.device = device;
  return key;
}

bool SameFusionKey(const FusionKey& a, const FusionKey& b) {
  // CPU or GPU, not the GPU's index: each rank has one device, and ranks' indices differ. Each
  // set's members run their own: the process set is in the signature.
  return a.device.is_cpu() == b.device.is_cpu() && a.signature() == b.signature();
}

int64_t TensorBytes(const TensorMeta& meta) {
  return meta.num_elements() * static_cast<int64_t>(DataTypeSize(meta.dtype));
}

int64_t FusionBytes(const TensorMeta& meta, const std::vector<int64_t>& first_dims) {
  if (meta.op != OpType::kAllgather) return TensorBytes(meta);
  int64_t row_elements = 1;
  for (size_t d = 1; d < meta.shape.size(); ++d) row_elements *= meta.shape[d];
  int64_t rows = 0;
  for (int64_t dim : first_dims) rows += dim;
  return rows * row_elements * static_cast<int64_t>(DataTypeSize(meta.dtype));
}

bool IsFusibleOp(OpType op) {
  return op == OpType::kAllreduce || op == OpType::kAllgather || op == OpType::kReducescatter;
}

bool FusionBatch::Admits(const FusionKey& key, int64_t bytes) const {
  if (count_ == 0) return true;
  return IsFusibleOp(key.op) && SameFusionKey(key_, key) && bytes <= threshold_ - bytes_;
}

void FusionBatch::Add(const FusionKey& key, int64_t bytes) {
  if (count_ == 0) key_ = key;
  bytes_ += bytes;
  ++count_;
}

}  // namespace kolo
