// Plain structs of kolo's control protocol (docs/PROTOCOL.md). transport/ converts them to and
// from the generated protobuf types; controller/ and the background loop use only these.
// Value types; no threading concerns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/op_signature.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "kolo/version.h"

namespace kolo {

// Full description of one named op as a rank submitted it: its signature (op, dtype, reduction,
// scale factors, root, process set: core/op_signature.h) and the rest.
struct TensorMeta : OpSignature {
  // In a process set, the scoped name (ScopedName in core/process_sets.h).
  std::string name;
  std::vector<int64_t> shape;
  Device device;
  // Alltoall: rows of dimension 0 sent to each rank, by rank (within the set).
  // add_process_set: the members; remove_process_set: `root` holds the id.
  std::vector<int64_t> splits;
  std::string group;   // grouped allreduce: the group's key, "" for none
  int group_size = 0;  // grouped allreduce: tensors in the group

  int64_t num_elements() const;
};
bool operator==(const TensorMeta& a, const TensorMeta& b);
inline bool operator!=(const TensorMeta& a, const TensorMeta& b) {
  return !(a == b);
}

// One entry of a worker's request batch: either full metadata, or the cache id the controller
// assigned to identical metadata earlier (cache_id != 0, meta unused).
struct Request {
  uint32_t cache_id = 0;
  TensorMeta meta;
};

// Cache ids of the ops a rank that joined the job cannot stand in for (broadcast, allgather,
// reducescatter: join supports allreduce only; and every op of a process set, whose joins are
// the set's own) carry this bit; the job's allreduce ids never do. A fast-path round runs
// such an id only when every rank, joined or not, reported it ready (core/loop/round_agreement.h;
// a rank outside an op's set always does), and since they sort after every allreduce id, a
// round message's ready list is its allreduces followed by them (docs/PROTOCOL.md,
// "Response cache").
inline constexpr uint32_t kEveryRankCacheIdBit = 0x80000000u;
inline bool NeedsEveryRank(uint32_t cache_id) {
  return (cache_id & kEveryRankCacheIdBit) != 0;
}

// The control protocol's version (docs/PROTOCOL.md): every Hello carries it and the controller
// admits only its own, so ranks of different kolo builds fail init with both versions named
// instead of misreading each other's messages. Raised with every incompatible change.
inline constexpr int kProtocolVersion = 9;

// First message on every worker stream.
struct Hello {
  int rank = -1;
  int size = 0;
  std::string host;
  std::string data_address;  // "ip:port"
  // The kernel and CPUs the rank runs on ("" if unknown): which ranks share its cores, whatever
  // host names they report (runtime/core_share.h).
  std::string machine;
  // The sender's build; a Hello read off the wire has the peer's (protocol 0: before v0.2).
  int protocol = kProtocolVersion;
  std::string kolo_version = KOLO_VERSION_STRING;  // for messages
};

struct WorkerMessage {
  enum class Kind { kHello, kRequests, kShutdown, kAbort, kPing };
  Kind kind = Kind::kPing;
  Hello hello;                    // kHello
  std::vector<Request> requests;  // kRequests
  std::string reason;             // kAbort: the root cause this rank hit
  int64_t ping_unix_us = 0;       // kPing: the worker's wall clock when sent (0: keepalive)
};

struct PeerInfo {
  int rank = -1;
  std::string host;
  std::string data_address;
  std::string machine;  // its Hello's
};

// A decision of the controller, identical on every rank. Executed in `seq` order.
// The signature (core/op_signature.h) is its tensors': process_set is the set whose members run
// it (0: every rank); only they have entries for it, the other ranks skip it. add_process_set:
// `root` is the new id, `splits` the members.
struct Response : OpSignature {
  uint64_t seq = 0;
  // The tensors are in GPU memory (each rank on its own device: ranks agree on CPU or GPU, not
  // on the GPU's index), so the op runs on the GPU path, and a joined rank's stand-in zeros are
  // made on its device.
  bool gpu = false;
  std::vector<std::string> names;     // fused tensors, in execution order
  std::vector<uint32_t> cache_ids;    // parallel to names: id to use next time, 0 = none
  std::vector<int64_t> num_elements;  // parallel to names
  std::string error;                  // non-empty: these ops failed on every rank
  StatusCode error_code = StatusCode::kMismatch;  // the code their callbacks receive
  std::vector<int64_t> first_dims;                // allgather: each rank's dim 0, by rank
  std::vector<int64_t> splits;  // alltoall: rows rank s sends to rank d at [s * size + d]
  // Allreduce: run hierarchically when the fused bytes reach this (core/hierarchy_rule.h;
  // kHierarchyFlat: never). Set by a fast-path round (the rounds' value) and by rank 0's
  // controller while KOLO_AUTOTUNE tunes the hierarchical choice; unset, each rank's executor
  // applies its configured KOLO_HIERARCHICAL rule, the same on every rank.
  std::optional<uint64_t> hierarchy_min_bytes;
  // Local only, never on the wire: set (seq 0) on responses a fast-path round decided
  // (docs/FAST-PATH.md), the same on every rank, unique in the job; the timeline's fused group.
  uint64_t fast_round = 0;
  uint64_t fast_group = 0;
  // Local only: an allreduce a round decided whose every rank's inputs came in that round's
  // messages (docs/FAST-PATH.md, "Eager"): eager_inputs[t * n + r] is rank r's input of tensor t
  // (n ranks: eager_inputs.size() / names.size()), valid while the response runs. The executor
  // reduces them in rank order instead of running the data plane. Empty: the data plane.
  std::vector<const void*> eager_inputs;
  // Local only: a lone allreduce a round decided whose every rank staged its input for the
  // plane's exchange numbered so (Executor::StageInput; docs/FAST-PATH.md, "Staged inputs"), the
  // same on every rank. Unset: none.
  std::optional<uint64_t> staged;

  bool is_error() const { return !error.empty(); }
};

struct ControllerMessage {
  enum class Kind { kWelcome, kResponses, kShutdown, kAbort, kPong };
  Kind kind = Kind::kResponses;
  std::vector<PeerInfo> peers;      // kWelcome, indexed by rank
  std::vector<Response> responses;  // kResponses
  std::string reason;               // kAbort
  int64_t ping_unix_us = 0;         // kPong: the Ping's send time, echoed
  int64_t controller_unix_us = 0;   // kPong: the controller's wall clock when it answered
};

// "welcome", "responses", "shutdown", "abort", "pong" (for log lines).
const char* KindName(ControllerMessage::Kind kind);

}  // namespace kolo
