#include "controller/meta_validation.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace kolo::controller {
namespace {

bool IsValidOp(OpType op) {
  const auto v = static_cast<int32_t>(op);
  return v >= static_cast<int32_t>(OpType::kAllreduce) &&
         v <= static_cast<int32_t>(OpType::kRemoveProcessSet);
}

std::string Mismatch(const std::string& what, const std::string& name, int rank_a,
                     const std::string& value_a, int rank_b, const std::string& value_b) {
  return "Mismatched " + what + " for '" + name + "': rank " + std::to_string(rank_a) + " sent " +
         value_a + ", rank " + std::to_string(rank_b) + " sent " + value_b;
}

}  // namespace

std::string FormatScale(double value) {
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

Status CheckWellFormed(int rank, const TensorMeta& meta) {
  const std::string who = "rank " + std::to_string(rank);
  if (meta.name.empty()) return Internal(who + " announced a tensor without a name");
  const std::string what = who + " announced '" + meta.name + "' with ";
  if (!IsValidOp(meta.op)) return Internal(what + "an unknown " + OpTypeName(meta.op));
  if (!IsValidDataType(static_cast<int32_t>(meta.dtype))) {
    return Internal(what + "an unknown " + DataTypeName(meta.dtype));
  }
  if (!IsValidReduceOp(static_cast<int32_t>(meta.reduce_op))) {
    return Internal(what + "an unknown " + ReduceOpName(meta.reduce_op));
  }
  // Bytes are computed in int64 (fusion, allgather totals over every rank): the same bound
  // each rank's enqueue applies.
  for (int64_t d : meta.shape) {
    if (d < 0) return Internal(what + "a negative dimension in " + ShapeToString(meta.shape));
  }
  const std::string oversize = DescribeOversize(meta.shape, meta.dtype);
  if (!oversize.empty()) return Internal(what + oversize);
  const bool reduces = meta.op == OpType::kAllreduce || meta.op == OpType::kReducescatter;
  if (reduces && meta.dtype == DataType::kBool &&
      (meta.reduce_op == ReduceOp::kAverage || meta.prescale != 1.0 || meta.postscale != 1.0)) {
    return Internal(what + "an average or a scale factor of bool, which have no meaning");
  }
  const bool rows = meta.op == OpType::kAllgather || meta.op == OpType::kAlltoall ||
                    meta.op == OpType::kReducescatter;
  if (rows && meta.shape.empty()) {
    return Internal(what + "a scalar, which has no dimension 0 to " + OpTypeName(meta.op));
  }
  if (meta.op == OpType::kAlltoall) {
    int64_t sum = 0;
    for (int64_t split : meta.splits) {
      if (split < 0 || split > meta.shape[0] - sum) {
        return Internal(what + "splits " + ShapeToString(meta.splits) + " for " +
                        std::to_string(meta.shape[0]) + " rows");
      }
      sum += split;
    }
    if (sum != meta.shape[0]) {
      return Internal(what + "splits " + ShapeToString(meta.splits) + " for " +
                      std::to_string(meta.shape[0]) + " rows");
    }
  }
  return Status::Ok();
}

std::string DescribeMismatch(int rank_a, const TensorMeta& a, int rank_b, const TensorMeta& b) {
  const std::string& name = a.name;
  if (a.op != b.op) {
    return Mismatch("operations", name, rank_a, OpTypeName(a.op), rank_b, OpTypeName(b.op));
  }
  if (a.op == OpType::kAddProcessSet && a.group != b.group) {  // KOLO_PROCESS_SETS, at init
    return "Ranks disagree on KOLO_PROCESS_SETS: rank " + std::to_string(rank_a) + " has \"" +
           a.group + "\", rank " + std::to_string(rank_b) + " has \"" + b.group + "\"";
  }
  if (a.op == OpType::kAddProcessSet && a.splits != b.splits) {
    return "Ranks disagree on the members of a new process set (add_process_set): rank " +
           std::to_string(rank_a) + " sent " + ShapeToString(a.splits) + ", rank " +
           std::to_string(rank_b) + " sent " + ShapeToString(b.splits);
  }
  if (a.dtype != b.dtype) {
    return Mismatch("data types", name, rank_a, DataTypeName(a.dtype), rank_b,
                    DataTypeName(b.dtype));
  }
  // Allgather concatenates along dimension 0, which may differ per rank; the rest must agree.
  const bool gather = a.op == OpType::kAllgather || a.op == OpType::kAlltoall;
  const bool shapes_agree =
      gather ? a.shape.size() == b.shape.size() && !a.shape.empty() &&
                   std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1)
             : a.shape == b.shape;
  if (!shapes_agree) {
    return Mismatch(OpTypeName(a.op) + (gather ? " inner dimensions" : " shapes"), name, rank_a,
                    ShapeToString(a.shape), rank_b, ShapeToString(b.shape));
  }
  // CPU against GPU only: rank 0 on cuda:0 and rank 1 on cuda:1 is the normal case.
  if (a.device.is_cpu() != b.device.is_cpu()) {
    return Mismatch("devices", name, rank_a, DeviceName(a.device), rank_b, DeviceName(b.device));
  }
  if (a.reduce_op != b.reduce_op) {
    return Mismatch("reduce ops", name, rank_a, ReduceOpName(a.reduce_op), rank_b,
                    ReduceOpName(b.reduce_op));
  }
  if (a.root != b.root) {
    return Mismatch("root ranks", name, rank_a, std::to_string(a.root), rank_b,
                    std::to_string(b.root));
  }
  if (a.group != b.group || a.group_size != b.group_size) {
    auto group = [](const TensorMeta& m) {
      return m.group.empty() ? std::string("no group")
                             : "group '" + m.group + "' of " + std::to_string(m.group_size);
    };
    return Mismatch("groups", name, rank_a, group(a), rank_b, group(b));
  }
  if (a.prescale != b.prescale) {
    return Mismatch("prescale factors", name, rank_a, FormatScale(a.prescale), rank_b,
                    FormatScale(b.prescale));
  }
  if (a.postscale != b.postscale) {
    return Mismatch("postscale factors", name, rank_a, FormatScale(a.postscale), rank_b,
                    FormatScale(b.postscale));
  }
  return "";
}

}  // namespace kolo::controller
