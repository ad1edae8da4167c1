#include "controller/response_cache.h"

namespace kolo::controller {

int ResponseCache::Cached::ranks() const {
  if (meta.op == OpType::kAllgather) return static_cast<int>(first_dims.size());
  if (meta.op == OpType::kAlltoall) return static_cast<int>(meta.splits.size());
  return 0;
}

TensorMeta ResponseCache::Cached::MetaOf(int place) const {
  TensorMeta own = meta;
  if (meta.op == OpType::kAllgather && !own.shape.empty()) {
    own.shape[0] = first_dims[static_cast<size_t>(place)];
  }
  if (meta.op == OpType::kAlltoall && !own.shape.empty()) {
    const size_t n = meta.splits.size();
    const auto row = splits.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(place) * n);
    own.splits.assign(row, row + static_cast<ptrdiff_t>(n));
    own.shape[0] = 0;
    for (int64_t rows : own.splits) own.shape[0] += rows;
  }
  return own;
}

const ResponseCache::Cached* ResponseCache::Lookup(uint32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second->cached;
}

uint32_t ResponseCache::IdOf(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? 0 : it->second.id;
}

uint32_t ResponseCache::NextId(const TensorMeta& meta) {
  if (next_count_ >= kEveryRankCacheIdBit) return 0;
  const uint32_t count = next_count_++;
  // A grouped allreduce's too (protocol 8): a joined rank's fast path knows a group's cut only
  // from an op it ran itself, so it never stands in for one (docs/FAST-PATH.md, "Which ops").
  const bool stand_in =
      meta.op == OpType::kAllreduce && meta.process_set == 0 && meta.group.empty();
  return stand_in ? count : count | kEveryRankCacheIdBit;
}

uint32_t ResponseCache::Commit(const TensorMeta& meta, const std::vector<int64_t>& first_dims,
                               const std::vector<int64_t>& splits) {
  auto it = by_name_.find(meta.name);
  if (it != by_name_.end()) {
    Entry& entry = it->second;
    const bool same = entry.cached.meta == meta && entry.cached.first_dims == first_dims &&
                      entry.cached.splits == splits;
    if (same && entry.id != 0) return entry.id;
    if (entry.id != 0) by_id_.erase(entry.id);
    if (!same && meta.op == OpType::kAlltoall) {
      // New splits: no id until the same come twice in a row. A router's change every step,
      // and an id each would only send the ranks whose own row repeated to a round first.
      entry.id = 0;
      entry.cached = Cached{meta, first_dims, splits};
      return 0;
    }
    entry.id = NextId(meta);
    if (entry.id == 0) {
      by_name_.erase(it);
      return 0;
    }
    entry.cached = Cached{meta, first_dims, splits};
    by_id_[entry.id] = &entry;
    return entry.id;
  }
  if (size() >= capacity_) return 0;
  const uint32_t id = NextId(meta);
  if (id == 0) return 0;
  auto added = by_name_.emplace(meta.name, Entry{id, Cached{meta, first_dims, splits}}).first;
  by_id_[id] = &added->second;
  return id;
}

}  // namespace kolo::controller
