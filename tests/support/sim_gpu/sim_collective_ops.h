// The simulated collectives' arithmetic and wire format: what each rank contributes to one op,
// how rank 0 combines the contributions of every rank (reducing in rank order with kolo's own
// kernels, ops/reduce_kernels.h), and what each rank gets back. Pure functions over bytes, so
// that the ranks can be threads or processes; SimCollectives moves the bytes (StarLink).
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo::gpu::sim {

enum class OpKind : uint32_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kAllGather = 3,
  kReduceScatter = 4,
  kSendRecv = 5,  // one group of Send/Recv
};
// The NCCL call that enqueues it: "ncclAllReduce", ... ("ncclGroupEnd" for kSendRecv).
const char* OpCall(OpKind kind);

struct P2pEntry {
  int32_t send = 0;  // 1: a Send to `peer`; 0: a Recv from `peer`
  int32_t peer = 0;
  uint64_t bytes = 0;
};

// What one rank brings to one op: its description (which every rank must agree on) and its
// bytes, already prescaled. kAllReduce, kAllGather: `count` elements; kReduceScatter: size *
// count; kBroadcast: count elements on the root, nothing elsewhere; kSendRecv: its sends in
// the order of `p2p`.
struct Contribution {
  OpKind kind = OpKind::kAllReduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0;
  uint64_t count = 0;
  uint64_t seq = 0;   // the op's number on the comm
  int32_t error = 0;  // an NCCL code: this rank failed the op (why: error_text)
  std::string error_text;
  std::vector<P2pEntry> p2p;
  std::vector<uint8_t> payload;
};

// What one rank gets back: an error for every rank, or its result bytes (kAllReduce and
// kBroadcast: count elements; kAllGather: size * count; kReduceScatter: count; kSendRecv: its
// receives in the order of its Recv entries).
struct Reply {
  int32_t error = 0;  // an NCCL code
  std::string error_text;
  std::vector<uint8_t> payload;
};

std::vector<uint8_t> Encode(const Contribution& c);
StatusOr<Contribution> DecodeContribution(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> Encode(const Reply& r);
StatusOr<Reply> DecodeReply(const std::vector<uint8_t>& bytes);

// Rank 0's work: the replies of every rank (by rank) from the contributions of every rank (by
// rank). A rank that failed the op, or ranks that disagree on it, give every rank the same
// error reply (ncclRemoteError naming the failed rank; ncclInvalidUsage for a mismatch).
std::vector<Reply> Combine(const std::vector<Contribution>& by_rank);

}  // namespace kolo::gpu::sim
