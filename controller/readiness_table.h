// ReadinessTable: per tensor name, which ranks have announced it and what they sent. A name is
// ready when all `size` ranks have announced it; names leave the table in the order they
// become ready. Owned by the Negotiator; not thread-safe (the Controller's lock guards it).
//
// Validation timing: a disagreement is noticed when the differing announcement arrives (only
// the differing metadata is stored), but reported when the name is complete, so that every
// rank has the op in flight when its error response arrives and the name is free again on all
// ranks at once. The text compares each rank, in rank order, with rank 0 and names the first
// one that differs, so it does not depend on arrival order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/messages.h"
#include "kolo/status.h"

namespace kolo::controller {

// A name whose negotiation has ended.
struct ReadyTensor {
  TensorMeta meta;        // rank 0's metadata: what every rank sent when `error` is empty
  std::string error;      // non-empty: the op fails on every rank with this text
  uint32_t cache_id = 0;  // the id workers use for meta.name from now on (set by Negotiator)
  StatusCode error_code = StatusCode::kMismatch;  // with `error`: what callbacks receive

  bool is_error() const { return !error.empty(); }
};

class ReadinessTable {
 public:
  explicit ReadinessTable(int size);

  // Records that `rank` announced `meta`. Appends the name to *ready if this completes it (or
  // fails it at once because a rank has shut down). A non-OK status is a protocol error that
  // names the rank: the rank is out of range, announced a still-pending name twice, or
  // announced anything after its own shutdown notice. The table is unchanged on error.
  Status Announce(int rank, const TensorMeta& meta, std::vector<ReadyTensor>* ready);

  // `rank` called shutdown(): it will submit nothing more, but keeps executing what is
  // decided until the job-wide Shutdown. Pending names it never announced fail now (appended
  // to *ready in order of first announcement); names it announced stay pending; a later new
  // name fails at once, naming the lowest departed rank. Idempotent.
  void MarkShutdown(int rank, std::vector<ReadyTensor>* ready);

  // `rank`, already shut down, left the job before the job-wide Shutdown (its shutdown()
  // stopped waiting for the others): the names it announced can no longer run either, so
  // every pending name fails now. Idempotent.
  void MarkGone(int rank, std::vector<ReadyTensor>* ready);

  bool has_shut_down(int rank) const { return shut_down_[rank]; }
  int num_shut_down() const { return num_shut_down_; }
  int pending_count() const { return static_cast<int>(pending_.size()); }
  // Ranks that have not yet announced `name`, ascending; empty if `name` is not pending.
  std::vector<int> MissingRanks(const std::string& name) const;

 private:
  struct Pending {
    uint64_t arrival = 0;                 // order of first announcement
    int first_rank = -1;                  // who announced it first
    TensorMeta first;                     // what `first_rank` sent
    std::vector<bool> announced;          // by rank
    int count = 0;                        // number of true entries in `announced`
    std::map<int, TensorMeta> differing;  // ranks whose metadata differs from `first`
  };

  // The result of a complete entry: success with rank 0's metadata, or the mismatch text.
  ReadyTensor Finish(const Pending& entry) const;
  // The lowest departed rank that has not announced `entry` (any departed rank for a new
  // name, entry == nullptr); -1 if none.
  int FirstDepartedMissing(const Pending* entry) const;
  std::string ShutdownError(int departed, const std::string& name) const;

  const int size_;
  uint64_t next_arrival_ = 0;
  std::unordered_map<std::string, Pending> pending_;
  std::vector<bool> shut_down_;  // by rank
  int num_shut_down_ = 0;
};

}  // namespace kolo::controller
