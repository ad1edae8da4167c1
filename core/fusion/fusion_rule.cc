#include "core/fusion/fusion_rule.h"

namespace kolo {

FusionKey FusionKey::Of(const TensorMeta& meta) {
  FusionKey key;
  key.op = meta.op;
  key.dtype = meta.dtype;
  key.device = meta.device;
  key.reduce_op = meta.reduce_op;
  key.prescale = meta.prescale;
  key.postscale = meta.postscale;
  key.process_set = meta.process_set;
  return key;
}

bool SameFusionKey(const FusionKey& a, const FusionKey& b) {
  // CPU or GPU, not the GPU's index: each rank has one device, and ranks' indices differ.
  if (a.op != b.op || a.dtype != b.dtype || a.device.is_cpu() != b.device.is_cpu()) return false;
  if (a.process_set != b.process_set) return false;  // each set's members run their own
  if (a.op == OpType::kAllgather) return true;       // no reduction: nothing else to agree on
  return a.reduce_op == b.reduce_op && a.prescale == b.prescale && a.postscale == b.postscale;
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
