// kolo's elastic jobs (docs/ELASTIC.md): a job launched by `kolorun --min-np/--max-np/
// --host-discovery-script` keeps training when ranks are lost and grows when hosts join.
//
// The launcher (kolorun's elastic driver) holds the job's membership: it survives any rank. A
// process of an elastic job has KOLO_ELASTIC_RENDEZVOUS (the driver's address) and
// KOLO_ELASTIC_WORKER_ID in its environment instead of KOLO_RANK/KOLO_SIZE/KOLO_CONTROLLER;
// every init() (kolo::init, Runtime::Create) asks the driver for this process's place in the
// next membership (a generation: its rank, size, local and cross ranks, and the controller's
// address) and then starts as a fixed-size job would. After a job-fatal error (kAborted: a rank
// was lost), the survivors call shutdown() and init() again and are renumbered into the next
// generation; a message of an older generation is refused by every handshake (the job id of a
// generation names it). A training loop restores its last committed state before it goes on
// and re-syncs it from the new rank 0; kolo.torch.elastic does that (Horovod's hvd.elastic),
// and so can a C++ loop with these calls.
//
// Threading: every function here may be called from any thread; each waits at most
// KOLO_TIMEOUT_SECONDS for the driver.
#pragma once

#include <cstdint>
#include <string>

#include "kolo/status.h"

namespace kolo::elastic {

// Whether this process belongs to an elastic job (KOLO_ELASTIC_RENDEZVOUS is set).
bool enabled();

// Horovod's HostUpdateResult, as bits: what changed in the job's hosts.
enum HostUpdateBits : int {
  kNoUpdate = 0,
  kHostsRemoved = 1,
  kHostsAdded = 2,
};

struct HostUpdates {
  // The driver's clock of host changes: grows with every change of the hosts it may run ranks
  // on (discovered, removed, blacklisted); 0 before the first change after the job started.
  int64_t timestamp = 0;
  // What changed after the caller's `since` timestamp: HostUpdateBits or'ed; kNoUpdate when
  // nothing did (then timestamp == since or less).
  int kinds = kNoUpdate;
};

// Asks the driver what changed in the job's hosts after `since` (a timestamp an earlier call
// returned; 0 for all changes since the job started). Horovod's check_host_updates calls this
// at every commit() on rank 0 and broadcasts the answer, so that every rank leaves its loop at
// the same step when hosts were added. FailedPrecondition outside an elastic job; Unavailable
// or DeadlineExceeded when the driver cannot be reached.
StatusOr<HostUpdates> poll_host_updates(int64_t since);

// The generation of the membership this process last joined (1 for the job's first), 0 before
// its first init(). Not reset by shutdown().
int64_t generation();

}  // namespace kolo::elastic
