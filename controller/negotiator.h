// Negotiator: the controller's whole decision state as plain data and plain calls (no threads;
// time is passed in). It resolves cache ids, feeds the ReadinessTable, commits agreed metadata
// to the ResponseCache, and plans ready tensors into numbered Responses. The Controller owns one
// and calls it under its lock; tests drive it directly. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "controller/readiness_table.h"
#include "controller/response_cache.h"
#include "controller/stall_inspector.h"
#include "core/clock.h"
#include "core/messages.h"
#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo::controller {

class Negotiator {
 public:
  // Reads the job's size, KOLO_FUSION_THRESHOLD and KOLO_CACHE_CAPACITY from `options`, which
  // must outlive it (the Controller's).
  explicit Negotiator(const Options& options);
  Negotiator(Options&&) = delete;  // it keeps a reference

  // Applies one request batch from `rank`, received at `now` (non-decreasing from call to
  // call), in order. A non-OK status is a protocol error that names the rank (unknown cache
  // id, malformed metadata, a name announced twice, requests after shutdown); the Controller
  // aborts the job on it. Requests before the bad one have been applied; the rest of the batch
  // is dropped. When `events` is not null, the negotiation steps of the applied requests are
  // appended to it, cache ids already resolved to names (ReadinessTable::Announce).
  Status AddRequests(int rank, const std::vector<Request>& requests, Clock::TimePoint now,
                     std::vector<NegotiationEvent>* events = nullptr);

  // `rank` sent its shutdown notice: pending names it never announced fail now, and every
  // later new name at once (ReadinessTable::MarkShutdown). Idempotent. `events` as above.
  void AddShutdown(int rank, std::vector<NegotiationEvent>* events = nullptr);
  // `rank` left after its notice but before the job-wide Shutdown (ReadinessTable::MarkGone).
  void AddGone(int rank, std::vector<NegotiationEvent>* events = nullptr);

  // Number of tensors ready and not yet planned.
  int ready_count() const { return static_cast<int>(ready_.size()); }
  bool all_shut_down() const { return table_.num_shut_down() == options_.size; }
  // Names pending in the global set and in every process set.
  int pending_count() const;

  // Plans every ready tensor into responses (fused, numbered from 1 across the job) and
  // forgets them. Empty when nothing is ready. Fuses under KOLO_FUSION_THRESHOLD, or under
  // `fusion_threshold_bytes` (the autotuner's).
  std::vector<Response> Plan();
  std::vector<Response> Plan(int64_t fusion_threshold_bytes);

  // Drops ready tensors without planning them (after a job abort).
  void DropReady() { ready_.clear(); }

  const ReadinessTable& table() const { return table_; }
  // The global table and every process set's, for the StallInspector; valid until the next
  // non-const call.
  std::vector<WatchedTable> WatchedTables() const;
  const ResponseCache& cache() const { return cache_; }
  uint64_t next_seq() const { return next_seq_; }

 private:
  // The metadata `cache_id` stands for, as `rank` announced it: the cached entry's, or an
  // allgather's or alltoall's row of this rank (copied to `*resolved`). `*id` is the id where
  // the metadata is exactly what it stands for, else 0.
  StatusOr<const TensorMeta*> ResolveCacheId(int rank, uint32_t cache_id, TensorMeta* resolved,
                                             uint32_t* id) const;
  // Records the cache id of every success appended to ready_ from index `first` on.
  void CommitToCache(size_t first);
  // Process sets (docs/PROTOCOL.md, "Process sets"): each has its own readiness table over
  // its members, indexed by their place in the set; the global table is set 0's. A set
  // exists from the planning of its add_process_set to that of its remove_process_set.
  struct ProcessSet {
    std::vector<int> ranks;  // ascending global ranks
    std::unique_ptr<ReadinessTable> table;
    int IndexOf(int rank) const;  // -1: not a member
  };
  // A protocol error when an add/remove_process_set announcement is malformed (members not
  // ascending ranks of the job, or the op itself in a set); OK for every other op.
  Status CheckProcessSetOp(int rank, const TensorMeta& meta) const;
  // Applies the add and remove decisions among ready_ (before they are planned): an add gets
  // its id (meta.root); a removal fails while names of the set are pending.
  void DecideProcessSets();
  std::string PendingText(const ProcessSet& set) const;
  // Adds to the errors among ready_ from `first` on that their rank numbers count within set
  // `id` (the set's table numbers its members 0, 1, ...), and which job ranks those are.
  void AnnotateSetErrors(size_t first, int id, const ProcessSet& set);

  const Options& options_;
  ReadinessTable table_;
  ResponseCache cache_;
  std::vector<ReadyTensor> ready_;  // in readiness order
  uint64_t next_seq_ = 1;
  std::map<int, ProcessSet> sets_;
  int next_set_id_ = 1;
};

}  // namespace kolo::controller
