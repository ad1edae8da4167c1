// ReadinessTable: per tensor name, which ranks have announced it and what they sent. A name is
// ready when all `size` ranks have announced it; names leave the table in the order they
// become ready. Owned by the Negotiator; not thread-safe (the Controller's lock guards it).
//
// Validation timing: a disagreement is noticed when the differing announcement arrives (only
// the differing metadata is stored), but reported when the name is complete, so that every
// rank has the op in flight when its error response arrives and the name is free again on all
// ranks at once. The text compares each rank, in rank order, with rank 0 and names the first
// one that differs, so it does not depend on arrival order.
//
// Time: the table keeps the time each pending name was first announced (given by the caller,
// so the table stays a plain value) for the StallInspector, and reports each negotiation step
// as a NegotiationEvent for the Controller's timeline.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "controller/announced_matrix.h"
#include "controller/id_index.h"
#include "core/clock.h"
#include "core/messages.h"
#include "kolo/status.h"

namespace kolo::controller {

// A name whose negotiation has ended.
struct ReadyTensor {
  TensorMeta meta;        // rank 0's metadata: what every rank sent when `error` is empty
  std::string error;      // non-empty: the op fails on every rank with this text
  uint32_t cache_id = 0;  // the id workers use for meta.name from now on (set by Negotiator)
  StatusCode error_code = StatusCode::kMismatch;  // with `error`: what callbacks receive
  std::vector<int64_t> first_dims;  // allgather, on success: each rank's dimension 0, by rank
  std::vector<int64_t> splits;      // alltoall, on success: rows s sends d at [s * size + d]

  bool is_error() const { return !error.empty(); }
};

// One step of a name's negotiation, in the order the steps happened. The Controller turns them
// into timeline events (docs/TIMELINE.md): kBegin -> `B` NEGOTIATE_<OP>, kAnnounce -> the
// rank's tick, kEnd -> `E`. Every step of one name carries the op of its first announcement.
struct NegotiationEvent {
  enum class Kind { kBegin, kAnnounce, kEnd };
  Kind kind = Kind::kAnnounce;
  std::string name;
  OpType op = OpType::kAllreduce;
  // kAnnounce: the rank that announced. kEnd: the rank whose announcement completed the name
  // (successfully or with a mismatch); -1 when it failed without completing.
  int rank = -1;

  bool operator==(const NegotiationEvent& other) const {
    return kind == other.kind && name == other.name && op == other.op && rank == other.rank;
  }
};

// A pending name as the StallInspector sees it.
struct PendingName {
  std::string name;
  OpType op = OpType::kAllreduce;  // as first announced
  Clock::TimePoint first_seen;     // when the first rank announced it
  std::vector<int> missing;        // ranks that have not announced it, ascending; never empty
};

class ReadinessTable {
 public:
  // `event_ranks`, if given, names rank r as event_ranks[r] in the events (a process set's
  // table counts its members 0, 1, ...; the timeline shows job ranks).
  explicit ReadinessTable(int size, std::vector<int> event_ranks = {});

  // Records that `rank` announced `meta` at `now` (which must not decrease from call to call).
  // Appends the name to *ready if this completes it (or fails it at once because a rank has
  // shut down). A non-OK status is a protocol error that names the rank: the rank is out of
  // range, announced a still-pending name twice, or announced anything after its own shutdown
  // notice. The table (and *events) is unchanged on error. `events` may be null; otherwise
  // this announcement's steps (kBegin for a new name, kAnnounce, kEnd) are appended to it.
  // `cache_id`: the id `meta` was announced by, when `meta` is exactly what that id stands
  // for (0: full metadata, or metadata resolved per rank): such an announcement finds its
  // name by the id and agrees with another one of the same id without comparing fields, so
  // that a step of cached tensors costs each rank a few integer lookups (docs/SCALE.md).
  Status Announce(int rank, const TensorMeta& meta, Clock::TimePoint now,
                  std::vector<ReadyTensor>* ready, std::vector<NegotiationEvent>* events = nullptr,
                  uint32_t cache_id = 0);

  // The common case of Announce, cheaply: `rank` announces by `cache_id` a name that is
  // pending because another rank announced it by that same id (so the metadata is the same and
  // no event is recorded). Returns false, changing nothing, whenever Announce has more to do:
  // no such pending name, a rank that announced it already or shut down, a join. A step of
  // cached tensors costs each rank one lookup and one bit per tensor this way (docs/SCALE.md).
  bool AnnounceById(int rank, uint32_t cache_id, std::vector<ReadyTensor>* ready);

  // AnnounceById over ids[0 .. count) in order, by words: the ids of one block of 64
  // (IdIndex) cost one lookup, and whether all of them are pending by the same id one AND.
  // Stops at the first id AnnounceById would refuse and returns how many it counted in; the
  // table ends as AnnounceById's calls leave it, ready order included. Cheapest when the ids
  // ascend (a run of them, as they arrive on the wire).
  size_t AnnounceIds(int rank, const uint32_t* ids, size_t count, std::vector<ReadyTensor>* ready);

  // `rank` called shutdown(): it will submit nothing more, but keeps executing what is
  // decided until the job-wide Shutdown. Pending names it never announced fail now (appended
  // to *ready in order of first announcement, with a kEnd event each when `events` is not
  // null); names it announced stay pending; a later new name fails at once, naming the lowest
  // departed rank. Idempotent.
  void MarkShutdown(int rank, std::vector<ReadyTensor>* ready,
                    std::vector<NegotiationEvent>* events = nullptr);

  // `rank`, already shut down, left the job before the job-wide Shutdown (its shutdown()
  // stopped waiting for the others): the names it announced can no longer run either, so
  // every pending name fails now (events as for MarkShutdown). Idempotent.
  void MarkGone(int rank, std::vector<ReadyTensor>* ready,
                std::vector<NegotiationEvent>* events = nullptr);

  bool has_shut_down(int rank) const { return shut_down_[rank]; }
  bool has_joined(int rank) const { return joined_[rank]; }
  int num_shut_down() const { return num_shut_down_; }
  int pending_count() const { return static_cast<int>(pending_.size()); }
  bool is_pending(const std::string& name) const { return pending_.count(name) != 0; }
  // Ranks that have not yet announced `name`, ascending; empty if `name` is not pending.
  std::vector<int> MissingRanks(const std::string& name) const;

  // When the oldest pending name was first announced; nullopt when nothing is pending. O(1).
  std::optional<Clock::TimePoint> oldest_first_seen() const;
  // The pending names first announced at or before `cutoff`, oldest first. O(names × size).
  std::vector<PendingName> WaitingSince(Clock::TimePoint cutoff) const;

 private:
  struct Pending;
  using PendingMap = std::unordered_map<std::string, Pending>;
  struct Pending {
    uint64_t arrival = 0;                 // order of first announcement
    Clock::TimePoint first_seen;          // time of first announcement
    int first_rank = -1;                  // who announced it first
    TensorMeta first;                     // what `first_rank` sent
    uint32_t first_id = 0;                // the cache id `first` was announced by (0: none)
    uint32_t id_key = 0;                  // its key in by_id_ (0: none)
    uint32_t slot = 0;                    // its column in announced_
    std::map<int, TensorMeta> differing;  // ranks whose metadata differs from `first`
  };

  // Every rank announced `entry`, or (for an allreduce) every rank that has not joined.
  bool IsComplete(const Pending& entry) const;
  // The failure of an op other than allreduce while a rank has joined; "" if it may run.
  std::string JoinConflict(const TensorMeta& meta) const;
  // After `rank` joined: completes the allreduces that only waited for it and fails the
  // collectives that cannot run with joined ranks.
  void SettleAfterJoin(std::vector<ReadyTensor>* ready, std::vector<NegotiationEvent>* events);
  // The result of a complete entry: success with rank 0's metadata, or the mismatch text.
  ReadyTensor Finish(const Pending& entry) const;
  // The lowest departed rank that has not announced `entry` (any departed rank for a new
  // name, entry == nullptr); -1 if none.
  int FirstDepartedMissing(const Pending* entry) const;
  std::string ShutdownError(int departed, const std::string& name) const;
  // Removes a pending name from both indexes.
  void Erase(PendingMap::iterator it);

  // A new name's first announcement (Announce's arguments): fails it at once, returning
  // pending_.end(), when it cannot complete (a departed rank, a join conflict); else opens its
  // entry, which the caller counts `rank` into.
  PendingMap::iterator Open(int rank, const TensorMeta& meta, Clock::TimePoint now,
                            uint32_t cache_id, std::vector<ReadyTensor>* ready,
                            std::vector<NegotiationEvent>* events);
  // A later announcement of the open entry `it`: notes metadata that differs, and indexes the
  // entry by `cache_id` if the name was first announced in full.
  void AddToOpen(PendingMap::iterator it, int rank, const TensorMeta& meta, uint32_t cache_id);
  // The entry `meta` (announced by `cache_id`) belongs to; pending_.end() for a new name.
  PendingMap::iterator Find(const TensorMeta& meta, uint32_t cache_id);
  // Appends one step to `events` unless it is null (nobody records), `rank` as event_ranks_
  // names it.
  void Note(std::vector<NegotiationEvent>* events, NegotiationEvent::Kind kind,
            const std::string& name, OpType op, int rank) const;

  const int size_;
  const std::vector<int> event_ranks_;
  uint64_t next_arrival_ = 0;
  PendingMap pending_;
  std::map<uint64_t, std::string> by_arrival_;  // the names of pending_, oldest first
  // Pending names that a cache id announced, by that id, with what AnnounceById needs; flagged
  // when first announced by this id and not a join (AnnounceById's).
  struct IdEntry {
    PendingMap::iterator it;
    uint32_t slot = 0;  // its entry's
  };
  IdIndex<IdEntry> by_id_;
  AnnouncedMatrix announced_;    // which ranks announced each pending name
  std::vector<bool> shut_down_;  // by rank
  int num_shut_down_ = 0;
  // Ranks that announced the join and wait for the others: allreduces complete without them
  // (they contribute zeros); other collectives fail while any rank has joined.
  std::vector<bool> joined_;  // by rank
  int num_joined_ = 0;
};

}  // namespace kolo::controller
