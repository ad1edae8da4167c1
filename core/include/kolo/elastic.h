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
#include <functional>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::elastic {

// Whether this process belongs to an elastic job: an init() of it joined a generation through
// kolorun's elastic driver (it stays true after shutdown()). False before the first init().
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

// ---- The training loop's side: Horovod's hvd.elastic.run and State, for C++ ----

// What a training loop keeps across a lost rank (Horovod's State). Subclass it: Save copies the
// live state aside, Restore goes back to that copy, Sync gives every rank rank 0's state (a
// broadcast). Not thread-safe: the training thread owns it.
class State {
 public:
  virtual ~State() = default;
  virtual void Save() = 0;
  virtual void Restore() = 0;
  virtual Status Sync() = 0;

  // Save(), then whether the job's hosts changed since the last commit: rank 0 asks kolorun's
  // driver and broadcasts the answer, so that every rank sees the same (outside an elastic job:
  // never). True: the training function should return (any status); Run then re-initialises
  // into the next generation keeping the state, as Horovod's HostsUpdatedInterrupt does (and
  // without a Sync when hosts were only removed: skip_sync). An error: the broadcast failed (a
  // lost rank), to be returned like any failed op.
  StatusOr<bool> Commit();

  // Called after every re-initialisation, before Sync (Horovod's register_reset_callbacks):
  // re-make process sets, rescale the learning rate to the new size, ...
  void RegisterResetCallback(std::function<void()> callback);

 private:
  friend Status Run(State* state, const std::function<Status()>& train);
  std::vector<std::function<void()>> reset_callbacks_;
  int64_t hosts_seen_ = 0;
  bool hosts_updated_ = false;
  bool skip_sync_ = false;
};

// Runs `train` in an elastic loop (Horovod's hvd.elastic.run): init(), state->Sync(), train().
// When train returns OK, shuts down and returns OK. When it returns after Commit() said hosts
// changed, or with a job-fatal error (kAborted, kUnavailable, kDeadlineExceeded, kShutdown:
// a rank was lost), shuts down, restores the last commit (not after changed hosts), calls the
// reset callbacks and starts again in the next generation (in a fixed job, the same job again,
// as Horovod does). Any other error (a bad argument, a mismatch, kInternal) is returned after
// shutdown(), and so is a failed init(); kolo.torch's run also resets on errors a script
// raises itself.
Status Run(State* state, const std::function<Status()>& train);

}  // namespace kolo::elastic
