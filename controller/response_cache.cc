#include "controller/response_cache.h"

namespace kolo::controller {

const TensorMeta* ResponseCache::Lookup(uint32_t id) const {
  auto it = name_by_id_.find(id);
  if (it == name_by_id_.end()) return nullptr;
  return &by_name_.at(it->second).meta;
}

uint32_t ResponseCache::IdOf(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? 0 : it->second.id;
}

uint32_t ResponseCache::Commit(const TensorMeta& meta) {
  auto it = by_name_.find(meta.name);
  if (it != by_name_.end()) {
    Entry& entry = it->second;
    if (entry.meta == meta) return entry.id;
    name_by_id_.erase(entry.id);
    entry.id = next_id_++;
    entry.meta = meta;
    name_by_id_[entry.id] = meta.name;
    return entry.id;
  }
  if (size() >= capacity_) return 0;
  const uint32_t id = next_id_++;
  by_name_.emplace(meta.name, Entry{id, meta});
  name_by_id_[id] = meta.name;
  return id;
}

}  // namespace kolo::controller
