// ResponseCache: the controller's half of the response cache (DESIGN.md §2). It gives a tensor
// name whose metadata all ranks agreed on a small id, so that workers can announce it next
// time by id alone. Owned by the Negotiator; not thread-safe (the Controller's lock guards it).
//
// Rules (v0.1): ids are 1, 2, 3, ... in order of assignment and never reused; at most
// `capacity` names hold an id; once full, new names are simply not cached (no eviction).
// A name whose agreed metadata changes (say, a new shape) gets a fresh id in place of its old
// one, which is retired; that needs no free slot.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "core/messages.h"

namespace kolo::controller {

class ResponseCache {
 public:
  // `capacity` >= 0; 0 disables caching.
  explicit ResponseCache(int capacity) : capacity_(capacity) {}

  // The metadata `id` stands for, or nullptr if no live entry has that id.
  const TensorMeta* Lookup(uint32_t id) const;

  // The live id of `name`, 0 if it has none.
  uint32_t IdOf(const std::string& name) const;

  // Records that every rank agreed on `meta` and returns the id that workers should use for
  // meta.name from now on (0: not cached). Same metadata as the live entry: its id. Different
  // metadata: the old id is retired and a fresh one assigned. New name: a fresh id while
  // fewer than `capacity` names are cached, else 0.
  uint32_t Commit(const TensorMeta& meta);

  int size() const { return static_cast<int>(by_name_.size()); }
  int capacity() const { return capacity_; }

 private:
  struct Entry {
    uint32_t id = 0;
    TensorMeta meta;
  };

  const int capacity_;
  uint32_t next_id_ = 1;
  std::unordered_map<std::string, Entry> by_name_;
  std::unordered_map<uint32_t, std::string> name_by_id_;
};

}  // namespace kolo::controller
