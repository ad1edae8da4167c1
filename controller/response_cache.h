// ResponseCache: the controller's half of the response cache (DESIGN.md §2). It gives a tensor
// name whose metadata all ranks agreed on a small id, so that workers can announce it next
// time by id alone. Owned by the Negotiator; not thread-safe (the Controller's lock guards it).
//
// Rules: ids count 1, 2, 3, ... in order of assignment and are never reused; an op other than
// an ungrouped allreduce of the job's set has kEveryRankCacheIdBit set on its count
// (core/messages.h: a rank that joined the job cannot stand in for it on the fast path). At most
// `capacity` names hold an id; once full, new names are simply not cached (no eviction); a name
// counts against `capacity` once it held an id, even while it holds none. A name whose agreed
// metadata changes (say, a new shape, or for an allgather any rank's dimension 0) gets a fresh id
// in place of its old one, which is retired; that needs no free slot. An alltoall whose agreed
// metadata changes (any rank's splits) gets none until the same agreement completes twice in a row.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/messages.h"

namespace kolo::controller {

class ResponseCache {
 public:
  // `capacity` >= 0; 0 disables caching.
  explicit ResponseCache(int capacity) : capacity_(capacity) {}

  // What an id stands for: the agreed metadata (an allgather's shape and an alltoall's shape
  // and splits are rank 0's), for an allgather every rank's dimension 0 by rank, and for an
  // alltoall the split matrix (rows rank s sends rank d at [s * ranks + d]); ranks by member
  // index in a process set.
  struct Cached {
    TensorMeta meta;
    std::vector<int64_t> first_dims;
    std::vector<int64_t> splits;
    // The ranks the id was agreed among.
    int ranks() const;
    // The metadata rank `place` announced (`place` < ranks()).
    TensorMeta MetaOf(int place) const;
  };

  // What `id` stands for, or nullptr if no live entry has that id.
  const Cached* Lookup(uint32_t id) const;

  // The live id of `name`, 0 if it has none.
  uint32_t IdOf(const std::string& name) const;

  // Records that every rank agreed on `meta` (and, for an allgather, on `first_dims`; for an
  // alltoall, on the split matrix `splits`) and returns the id that workers should use for
  // meta.name from now on (0: not cached). Same agreement as the live entry: its id. A
  // different one: the old id is retired and a fresh one assigned; for an alltoall (any rank's
  // splits), none, until the same agreement comes twice in a row (splits that change every
  // step, as a mixture of experts' router makes them, stay off the fast path). New name: a
  // fresh id while fewer than `capacity` names are cached, else 0.
  uint32_t Commit(const TensorMeta& meta, const std::vector<int64_t>& first_dims = {},
                  const std::vector<int64_t>& splits = {});

  int size() const { return static_cast<int>(by_name_.size()); }
  int capacity() const { return capacity_; }

 private:
  struct Entry {
    uint32_t id = 0;
    Cached cached;
  };
  // The next id for an op; 0 once the count reached kEveryRankCacheIdBit (never in practice:
  // 2^31 commits).
  uint32_t NextId(const TensorMeta& meta);

  const int capacity_;
  uint32_t next_count_ = 1;
  std::unordered_map<std::string, Entry> by_name_;
  // The live ids, each to its entry in by_name_ (whose nodes do not move): one integer lookup
  // per cached announcement.
  std::unordered_map<uint32_t, const Entry*> by_id_;
};

}  // namespace kolo::controller
