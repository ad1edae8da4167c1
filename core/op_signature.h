// OpSignature: what one op must agree on with the others to share a response, and what a
// response says its tensors are: the op, dtype, reduction and scale factors, root and process
// set. TensorMeta, Response, FastSpec (core/loop/op_cache.h) and FusionKey
// (core/fusion/fusion_rule.h) embed it as their base, so its fields read as theirs
// (`meta.dtype`), and one op's signature passes from one to the next as a whole
// (`response.signature() = meta.signature()`), never field by field; it is compared (==) and
// hashed (OpSignatureHash) here only.
//
// A value type; no threading concerns.
#pragma once

#include <cstddef>
#include <type_traits>

#include "kolo/types.h"

namespace kolo {

struct OpSignature {
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  int root = -1;  // broadcast: the root; add/remove_process_set: the set's id; join: the last rank
  // The process set the op runs in (0: the global set). In a set, root and a request's splits
  // count within the set.
  int process_set = 0;

  // The signature part of whatever embeds it, to assign or compare as a whole.
  OpSignature& signature() { return *this; }
  const OpSignature& signature() const { return *this; }
};

// Equal signatures, field by field (scale factors as doubles, exactly). Only for OpSignature
// itself: a Response or a TensorMeta is not equal to another because their signatures are
// (compare their signature()s).
template <typename T, typename = std::enable_if_t<std::is_same_v<T, OpSignature>>>
bool operator==(const T& a, const T& b) {
  return a.op == b.op && a.dtype == b.dtype && a.reduce_op == b.reduce_op &&
         a.prescale == b.prescale && a.postscale == b.postscale && a.root == b.root &&
         a.process_set == b.process_set;
}
template <typename T, typename = std::enable_if_t<std::is_same_v<T, OpSignature>>>
bool operator!=(const T& a, const T& b) {
  return !(a == b);
}

// A hash consistent with ==, for maps keyed by signature.
struct OpSignatureHash {
  size_t operator()(const OpSignature& signature) const;
};

}  // namespace kolo
