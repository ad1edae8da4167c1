// ProcessSets: one rank's view of the job's process sets (README, "Process sets"): subsets of
// the ranks that run collectives among themselves. Set 0 is the global set (every rank) and is
// never stored. Sets are added and removed by collective ops the controller orders like any
// other (docs/PROTOCOL.md, "Process sets"); the background loop applies the decisions here, in
// response order, so that every rank sees every set appear and disappear at the same point of
// the job's one order of responses.
//
// Threading: every method may be called from any thread (one internal lock). Enqueue runs the
// caller's enqueue under that lock, so that an op checked against a set reaches the queue
// before a removal of that set can.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "kolo/status.h"

namespace kolo {

// The name a set's op is negotiated and queued under: `name` itself in the global set,
// "<name> [process set <id>]" in set `id`, so names are scoped per set (the same name may be
// in flight in two sets at once) and every message and timeline row about it shows the set.
std::string ScopedName(int process_set, const std::string& name);

// Where the calling rank stands in a set.
struct SetMembership {
  int id = 0;
  int rank = 0;  // this rank's index among the set's members (ascending global ranks)
  int size = 1;  // number of members
};

// Parses KOLO_PROCESS_SETS ("0,1;2,3": sets separated by ';', ranks by ','; spaces allowed)
// for a job of `size` ranks into sorted rank lists. "" gives none. The error says what is
// wrong, without the variable's name (the caller adds it).
StatusOr<std::vector<std::vector<int>>> ParseProcessSets(const std::string& text, int size);

// Checks the ranks of a new set for a job of `size` ranks (non-empty, in range, no duplicate)
// and returns them sorted.
StatusOr<std::vector<int>> CheckSetRanks(const std::vector<int>& ranks, int size);

class ProcessSets {
 public:
  ProcessSets(int rank, int size) : rank_(rank), size_(size) {}

  // This rank's place in set `id`, for an op described by `what` ("allreduce 'x'"). Fails
  // with kInvalidArgument when the set is unknown or this rank is not a member, and with
  // kFailedPrecondition while its removal is in flight; each message names the rank, the set
  // and `what`.
  StatusOr<SetMembership> Resolve(int id, const std::string& what) const;
  // Resolves set `id` and runs `enqueue` under the lock when it succeeds.
  Status Enqueue(int id, const std::string& what, const std::function<Status()>& enqueue) const;

  // The members of `id` (ascending), or empty when it is unknown. Set 0: every rank.
  std::vector<int> Members(int id) const;
  bool IsMember(int id) const;
  bool Known(int id) const;

  // The controller's decisions, applied by the background loop.
  void Add(int id, std::vector<int> ranks);
  void Remove(int id);
  // remove_process_set(id) was enqueued (true) or failed (false): while it is in flight, new
  // ops in the set fail at enqueue. Fails like Resolve when `id` is unknown, is 0, or is being
  // removed already.
  Status BeginRemove(int id);
  void EndRemove(int id);

 private:
  struct Set {
    std::vector<int> ranks;
    bool removing = false;
  };
  StatusOr<SetMembership> ResolveLocked(int id, const std::string& what) const KOLO_REQUIRES(mu_);

  const int rank_;
  const int size_;
  mutable Mutex mu_;
  std::map<int, Set> sets_ KOLO_GUARDED_BY(mu_);
};

// The process set the calling thread submits to (kolo::ProcessSetScope sets it); 0 by default.
int CurrentProcessSet();
namespace internal {
// Makes `id` the calling thread's current set and returns the previous one (the C API's
// kolo_set_process_set; C++ uses ProcessSetScope).
int SetCurrentProcessSet(int id);
}  // namespace internal

}  // namespace kolo
