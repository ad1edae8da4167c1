// The CPU executor's algorithms, one ordered list per op: the first entry that applies to the
// op moves its data (Horovod's ordered list of op implementations, each with Enabled(), here as
// constant tables of plain functions). What chooses is the same for every op (a Route): whether
// the ranks share memory (one host: ops/shm_*.h) and whether this op runs hierarchically
// (several hosts and the op's size rule: ops/hierarchical_*.h); each list ends with the flat
// algorithm over the DataPlane (a ring, a chain, pairwise exchanges), which always applies. The
// packing and unpacking around the data movement are the executor's (ops/cpu_executor*.cc), by
// the layouts of core/fusion/fusion_layout.h.
//
// Threading: the tables are constant; an entry runs on the executor's thread, with its planes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/data_plane.h"
#include "core/executor.h"
#include "core/shared_memory_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/hierarchical_allreduce.h"
#include "ops/hierarchical_gather.h"
#include "ops/pairwise_alltoall.h"
#include "ops/phase_scope.h"
#include "ops/ring_allreduce.h"

namespace kolo::ops {

// What an algorithm may run over: a CpuExecutor's planes and its ring scratch.
struct CpuPlanes {
  DataPlane* plane = nullptr;                     // every rank of the executor
  SharedMemoryPlane* shm = nullptr;               // the same ranks, on one host; or null
  const HostPlanes* host = nullptr;               // on several hosts (UseHierarchy); or null
  HierarchicalAllreduce* hierarchical = nullptr;  // the same, for allreduce; or null
  RingScratch* scratch = nullptr;
};

// What chooses an op's algorithm.
struct Route {
  bool shared_memory = false;  // CpuPlanes::shm is there
  bool hierarchical = false;   // CpuPlanes::host is there and this op runs over it
};

inline bool OnSharedMemory(const Route& route) {
  return route.shared_memory;
}
inline bool Hierarchically(const Route& route) {
  return route.hierarchical;
}
inline bool Always(const Route& /*route*/) {
  return true;
}

// One entry of a list: the phase it reports while it runs (PhaseObserver, the timeline's
// names), when it applies, and what it runs. `Args` are the op's (below).
template <typename Args>
struct Algorithm {
  const char* phase;
  bool (*applies)(const Route& route);
  Status (*run)(const CpuPlanes& planes, const Args& args);
};

// The ops' arguments, as the algorithms of ops/*.h take them; `what` names the op in errors.
// An allreduce in place over `count` elements at `data`.
struct AllreduceArgs {
  void* data;
  size_t count;
  DataType dtype;
  ReduceOp op;
  const std::string& what;
};
// A broadcast in place over `bytes` at `data` from `root`.
struct BroadcastArgs {
  void* data;
  size_t bytes;
  int root;
  const std::string& what;
};
// Every rank's block gathered at `data`, back to back in rank order (this rank's in place).
struct AllgatherArgs {
  void* data;
  const std::vector<size_t>& block_bytes;
  const std::string& what;
};
// Every rank's block reduced: `buffer` holds them (in the order the route's algorithm needs:
// place-major hierarchically, ops/hierarchical_reducescatter.h), `own` is where this rank's
// result goes (its block in `buffer`). `op` reduces an average as a sum; `ring_op` is the
// response's own, which the ring takes (ops/ring_reducescatter.h).
struct ReducescatterArgs {
  void* buffer;
  void* own;
  const std::vector<size_t>& block_elements;
  DataType dtype;
  ReduceOp op;
  ReduceOp ring_op;
  const std::string& what;
};
// The blocks the split matrix assigns (`splits[from * n + to]` rows of `row_bytes`): `send`
// from `input`, `recv` into `output`.
struct AlltoallArgs {
  const void* input;
  const std::vector<ByteBlock>& send;
  void* output;
  const std::vector<ByteBlock>& recv;
  const std::vector<int64_t>& splits;
  size_t row_bytes;
  const std::string& what;
};

// The lists, in the order they are tried.
extern const Algorithm<AllreduceArgs> kAllreduceAlgorithms[2];
extern const Algorithm<BroadcastArgs> kBroadcastAlgorithms[3];
extern const Algorithm<AllgatherArgs> kAllgatherAlgorithms[3];
extern const Algorithm<ReducescatterArgs> kReducescatterAlgorithms[3];
extern const Algorithm<AlltoallArgs> kAlltoallAlgorithms[2];

// The first entry of `list` that applies to `route` (the last one always does).
template <typename Args, size_t N>
const Algorithm<Args>& Choose(const Algorithm<Args> (&list)[N], const Route& route) {
  for (const Algorithm<Args>& algorithm : list) {
    if (algorithm.applies(route)) return algorithm;
  }
  return list[N - 1];
}

// Runs Choose's entry as its phase (reported to `observer`, which may be null).
template <typename Args, size_t N>
Status RunFirst(const Algorithm<Args> (&list)[N], const Route& route, const CpuPlanes& planes,
                const Args& args, PhaseObserver* observer) {
  const Algorithm<Args>& chosen = Choose(list, route);
  PhaseScope phase(observer, chosen.phase);
  return chosen.run(planes, args);
}

}  // namespace kolo::ops
