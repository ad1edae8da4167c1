// Helpers for the control-plane tests: fully populated sample messages (every field set to a
// non-default value) and field-by-field comparisons of core/messages.h structs.
// Used by wire_convert_test.cc and grpc_control_test.cc; plain functions.
#pragma once

#include <string>

#include "core/messages.h"

namespace kolo::transport::testing {

inline TensorMeta SampleMeta(const std::string& name) {
  TensorMeta meta;
  meta.name = name;
  meta.op = OpType::kBroadcast;
  meta.dtype = DataType::kBFloat16;
  meta.shape = {2, 0, 7, int64_t{1} << 40};
  meta.device = Device::Cuda(3);
  meta.reduce_op = ReduceOp::kMax;
  meta.root = 5;
  meta.prescale = 0.25;
  meta.postscale = -3.5;
  meta.process_set = 12;
  return meta;
}

inline WorkerMessage SampleRequests() {
  WorkerMessage message;
  message.kind = WorkerMessage::Kind::kRequests;
  message.requests.push_back({0, SampleMeta("grad/w1")});
  message.requests.push_back({42, TensorMeta{}});
  TensorMeta scalar;
  scalar.name = "loss";
  message.requests.push_back({0, scalar});
  return message;
}

inline Hello SampleHello(int rank) {
  return {rank, 4, "node-" + std::to_string(rank), "10.0.0." + std::to_string(rank) + ":4000"};
}

inline ControllerMessage SampleResponses() {
  ControllerMessage message;
  message.kind = ControllerMessage::Kind::kResponses;
  Response fused;
  fused.seq = (uint64_t{1} << 40) + 7;
  fused.op = OpType::kAllgather;
  fused.dtype = DataType::kFloat64;
  fused.reduce_op = ReduceOp::kProduct;
  fused.prescale = 2;
  fused.postscale = 0.125;
  fused.root = 3;
  fused.gpu = true;
  fused.process_set = 3;
  fused.names = {"a", "b/c"};
  fused.cache_ids = {9, 0};
  fused.num_elements = {6, int64_t{1} << 35};
  fused.first_dims = {3, 0, int64_t{1} << 33};
  fused.splits = {1, 2, 0, int64_t{1} << 34};
  Response failed;
  failed.seq = 8;
  failed.names = {"grad/w1"};
  failed.error =
      "Mismatched allreduce shapes for 'grad/w1': rank 0 sent [2, 3], rank 3 sent [3, 2]";
  Response departed;
  departed.seq = 9;
  departed.names = {"late"};
  departed.error = "rank 2 called shutdown() before submitting 'late'";
  departed.error_code = StatusCode::kShutdown;
  // The tuned hierarchical choice: 0 (always) and never must survive as set, unlike absent.
  Response always;
  always.seq = 10;
  always.names = {"grad/w2"};
  always.num_elements = {1024};
  always.hierarchy_min_bytes = 0;
  Response never = always;
  never.seq = 11;
  never.hierarchy_min_bytes = UINT64_MAX;
  message.responses = {fused, failed, departed, always, never};
  return message;
}

// Empty when equal, else the first field that differs.
inline std::string Diff(const Hello& a, const Hello& b) {
  if (a.rank != b.rank || a.size != b.size) return "rank/size";
  if (a.host != b.host || a.data_address != b.data_address) return "host/address";
  if (a.protocol != b.protocol || a.kolo_version != b.kolo_version) return "protocol/version";
  return "";
}

inline std::string Diff(const WorkerMessage& a, const WorkerMessage& b) {
  if (a.kind != b.kind) return "kind";
  if (a.reason != b.reason) return "reason";
  if (a.requests.size() != b.requests.size()) return "requests.size";
  for (size_t i = 0; i < a.requests.size(); ++i) {
    if (a.requests[i].cache_id != b.requests[i].cache_id) return "requests.cache_id";
    if (a.requests[i].cache_id == 0 && a.requests[i].meta != b.requests[i].meta) {
      return "requests.meta of " + a.requests[i].meta.name;
    }
  }
  return a.kind == WorkerMessage::Kind::kHello ? Diff(a.hello, b.hello) : "";
}

inline std::string Diff(const Response& a, const Response& b) {
  if (a.seq != b.seq || a.op != b.op || a.dtype != b.dtype || a.reduce_op != b.reduce_op) {
    return "seq/op/dtype/reduce_op";
  }
  if (a.prescale != b.prescale || a.postscale != b.postscale || a.root != b.root) {
    return "scales/root";
  }
  if (a.names != b.names || a.cache_ids != b.cache_ids || a.num_elements != b.num_elements) {
    return "names/cache_ids/num_elements";
  }
  if (a.error_code != b.error_code) return "error_code";
  if (a.first_dims != b.first_dims) return "first_dims";
  if (a.splits != b.splits) return "splits";
  if (a.gpu != b.gpu) return "gpu";
  if (a.process_set != b.process_set) return "process_set";
  if (a.hierarchy_min_bytes != b.hierarchy_min_bytes) return "hierarchy_min_bytes";
  return a.error == b.error ? "" : "error";
}

inline std::string Diff(const ControllerMessage& a, const ControllerMessage& b) {
  if (a.kind != b.kind) return "kind";
  if (a.reason != b.reason) return "reason";
  if (a.peers.size() != b.peers.size()) return "peers.size";
  for (size_t i = 0; i < a.peers.size(); ++i) {
    if (a.peers[i].rank != b.peers[i].rank || a.peers[i].host != b.peers[i].host ||
        a.peers[i].data_address != b.peers[i].data_address) {
      return "peers[" + std::to_string(i) + "]";
    }
  }
  if (a.responses.size() != b.responses.size()) return "responses.size";
  for (size_t i = 0; i < a.responses.size(); ++i) {
    std::string diff = Diff(a.responses[i], b.responses[i]);
    if (!diff.empty()) return "responses[" + std::to_string(i) + "]." + diff;
  }
  return "";
}

}  // namespace kolo::transport::testing
