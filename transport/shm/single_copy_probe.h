// ProbeSingleCopy: how the ranks of a shared-memory plane (transport/shm/shm_mesh.h) find out,
// at its creation, whether each may read and write every other's memory through cross-memory
// attach (transport/peer_memory.h), and agree on the answer. The kernel may refuse it
// (another user, Yama's ptrace_scope, a seccomp filter, a PID namespace in which a peer's
// process id names another process); the plane then copies through its slots instead.
//
// Each rank publishes its process id, a random token and the addresses of the token and of an
// inbox; syncs; reads every peer's token from the peer's memory and checks it against the one
// published (so the process id names the peer), and only then writes its own token into the
// peer's inbox; syncs; checks that every peer's token arrived; publishes its vote and syncs
// again. Single copy is on only when every rank voted yes.
//
// Threading: called by each rank's plane owner thread, all ranks at once (collective).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::transport {

// What one rank publishes for the probe, in memory every rank maps (ShmMesh's rank words).
struct ProbeWords {
  int64_t pid;
  uint64_t token;
  uint64_t token_address;  // in the rank's process
  uint64_t inbox_address;  // size entries of 8 bytes, the token of rank r at entry r
  int32_t vote;            // 1: this rank may read and write every peer's memory
  int32_t refusal;         // why not (a ProbeRefusal)
  int32_t error;           // the errno, for kRead and kWrite
  int32_t peer;            // the peer concerned
};

enum ProbeRefusal : int32_t {
  kProbeNone = 0,
  kProbeOff = 1,        // this rank did not try (KOLO_SHM_SINGLE_COPY=off)
  kProbeNotChosen = 6,  // this rank did not try: auto, and two ranks sharing a core
  kProbeRead = 2,       // reading the peer's memory failed
  kProbeWrite = 3,      // writing into the peer's memory failed
  kProbeStranger = 4,   // the peer's process id reads another process (a PID namespace?)
  kProbeLost = 5,       // the peer's write did not arrive here
};

struct ProbeOutcome {
  bool single_copy = false;
  ProbeRefusal refusal_kind = kProbeNone;  // the first rank that voted no: why
  // Why not, naming the rank ("rank 1 could not read rank 0's memory: not permitted (...)");
  // empty when single_copy.
  std::string refusal;
  std::vector<pid_t> pids;  // every rank's process id
};

// Collective: every rank of `size` calls it with the same `size`. `skip`: kProbeNone to try;
// kProbeOff or kProbeNotChosen to vote no, for that reason, without trying. `words(r)` is rank
// r's ProbeWords in the shared memory; `sync` is the plane's sync point. Fails only when a
// sync fails.
StatusOr<ProbeOutcome> ProbeSingleCopy(int rank, int size, ProbeRefusal skip,
                                       const std::function<ProbeWords*(int)>& words,
                                       const std::function<Status()>& sync);

}  // namespace kolo::transport
