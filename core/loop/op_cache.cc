#include "core/loop/op_cache.h"

#include <utility>

#include "core/fusion/fusion_rule.h"
#include "core/group_validation.h"

namespace kolo {

uint64_t GroupHash(const std::string& key) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : key) hash = (hash ^ c) * 1099511628211ull;
  return hash == 0 ? 1 : hash;
}

int GroupIndex(const std::string& scoped_key, const std::string& scoped_name) {
  // In a process set both carry the set's suffix (ScopedName, core/process_sets.h) once.
  std::string key = scoped_key;
  std::string name = scoped_name;
  const size_t suffix = name.find(" [process set ");
  if (suffix != std::string::npos) {
    const size_t length = name.size() - suffix;
    if (key.size() >= length && key.compare(key.size() - length, length, name, suffix) == 0) {
      key.resize(key.size() - length);
      name.resize(suffix);
    }
  }
  const int index = GroupMemberIndex(key, name);
  return index < 0 ? 0 : index;
}

OpCache::OpCache(int size, bool fast_path) : size_(size), fast_path_(fast_path) {}

Request OpCache::RequestFor(const TensorEntry& entry) const {
  Request request;
  auto it = by_name_.find(entry.meta.name);
  if (it != by_name_.end() && it->second.meta == entry.meta) {
    request.cache_id = it->second.id;
  } else {
    request.meta = entry.meta;
  }
  return request;
}

uint32_t OpCache::IdOf(const std::string& name) const {
  auto slot = by_name_.find(name);
  return slot == by_name_.end() ? 0 : slot->second.id;
}

const FastSpec* OpCache::SpecOf(uint32_t id) const {
  if (const FastSpec* own = Own(id)) return own;
  auto other = foreign_.find(id);
  return other == foreign_.end() ? nullptr : &other->second;
}

bool OpCache::MemberOf(int process_set, int rank) const {
  if (rank < 0 || rank >= size_) return false;
  if (process_set == 0) return true;
  auto set = set_members_.find(process_set);
  return set == set_members_.end() || set->second[static_cast<size_t>(rank)];
}

void OpCache::Remember(const Response& response, const std::vector<TensorEntry*>& entries) {
  // The controller's cache id for each name, as of this response; 0 retires the old one.
  for (size_t i = 0; i < response.names.size() && i < entries.size(); ++i) {
    const std::string& name = response.names[i];
    auto old = by_name_.find(name);
    const uint32_t id = i < response.cache_ids.size() ? response.cache_ids[i] : 0;
    if (fast_path_ && old != by_name_.end() && old->second.id != id) {
      own_.erase(old->second.id);  // retired: ids are not reused
      foreign_.erase(old->second.id);
    }
    if (id == 0) {
      by_name_.erase(name);
      continue;
    }
    by_name_[name] = Slot{id, entries[i]->meta};
    if (!fast_path_ || !TakesFastPath(response)) continue;
    // A joined rank's stand-in (core/loop/stand_ins.h) knows no group: an id stands for one
    // metadata, so what a real entry taught about its group stays.
    auto known = own_.find(id);
    if (known != own_.end() && known->second.group != 0 && entries[i]->meta.group.empty()) continue;
    own_[id] = SpecOf(response, i, entries[i]->meta);
  }
}

void OpCache::RememberForeign(const Response& response) {
  if (!fast_path_ || response.is_error() || !TakesFastPath(response)) return;
  for (size_t i = 0; i < response.names.size(); ++i) {
    FastSpec spec;  // what the timeline needs: this rank runs nothing of it
    spec.signature() = response.signature();
    spec.name = response.names[i];
    const uint32_t id = i < response.cache_ids.size() ? response.cache_ids[i] : 0;
    // A name's earlier id is retired (its members no longer report it), as is the name's id
    // when `id` is 0. Names are scoped by set, so a name stands for one id at a time. Only a
    // response of another set gets here, not a small op's path.
    for (auto it = foreign_.begin(); it != foreign_.end(); ++it) {
      if (it->first != id && it->second.name == spec.name) {
        foreign_.erase(it);
        break;
      }
    }
    if (id != 0 && foreign_.emplace(id, std::move(spec)).second) ++foreign_learned_;
  }
}

void OpCache::KnowSet(int process_set, const std::vector<int>& members) {
  std::vector<bool>& known = set_members_[process_set];
  known.assign(static_cast<size_t>(size_), false);
  for (int r : members) {
    if (r >= 0 && r < size_) known[static_cast<size_t>(r)] = true;
  }
}

void OpCache::ForgetSet(int process_set) {
  for (auto it = own_.begin(); it != own_.end();) {
    it = it->second.process_set == process_set ? own_.erase(it) : std::next(it);
  }
  for (auto it = foreign_.begin(); it != foreign_.end();) {
    it = it->second.process_set == process_set ? foreign_.erase(it) : std::next(it);
  }
  set_members_.erase(process_set);
}

bool OpCache::TakesFastPath(const Response& response) {
  if (response.gpu) return false;
  switch (response.op) {
    case OpType::kAllreduce:
    case OpType::kBroadcast:
    case OpType::kAllgather:
    case OpType::kReducescatter:
    case OpType::kAlltoall:
    case OpType::kBarrier:
      return true;
    default:
      return false;
  }
}

FastSpec OpCache::SpecOf(const Response& response, size_t index, const TensorMeta& meta) {
  FastSpec spec;
  spec.signature() = response.signature();
  spec.name = response.names[index];
  spec.num_elements = index < response.num_elements.size() ? response.num_elements[index] : 0;
  if (!meta.group.empty()) {
    spec.group = GroupHash(meta.group);
    spec.group_index = GroupIndex(meta.group, meta.name);
    spec.group_size = meta.group_size;
  }
  if (response.op == OpType::kAllgather) {
    // This tensor's row of the response's first dimensions (one row of `size` per tensor).
    const size_t size = response.first_dims.size() / response.names.size();
    const auto row = response.first_dims.begin() + static_cast<ptrdiff_t>(index * size);
    spec.first_dims.assign(row, row + static_cast<ptrdiff_t>(size));
  }
  if (response.op == OpType::kAlltoall) {
    spec.splits = response.splits;  // one tensor a response
    spec.fusion_bytes = 0;          // it never fuses; its own bytes differ by rank
    return spec;
  }
  spec.fusion_bytes = FusionBytes(meta, spec.first_dims);
  return spec;
}

}  // namespace kolo
