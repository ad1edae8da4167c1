// OpCache: what the controller's cache ids stand for on this rank (docs/PROTOCOL.md, "Response
// cache"; docs/FAST-PATH.md). For each name this rank ran, its id and the metadata the id stands
// for (its requests announce the id while the metadata is the same); for each id a cached op of
// this rank's may take the fast path with, what it stands for (FastSpec); the ids of the process
// sets this rank is not in (its round messages report them ready); and each set's members.
// Written by one owner, the ResponseRunner, as it runs the controller's responses; read by the
// loop (RequestFor) and the FastPath.
//
// Threading: not thread-safe; the thread that does the loop's work.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/messages.h"
#include "core/tensor_entry.h"

namespace kolo {

// What a cached op's id stands for; identical on every rank (from the controller's response
// that assigned the id, and for `fusion_bytes` the shape past dimension 0, which every rank
// agreed on). Its signature (core/op_signature.h) is the response's: an allreduce, broadcast,
// allgather, reducescatter, alltoall or barrier of any process set, grouped or not.
struct FastSpec : OpSignature {
  std::string name;
  int64_t num_elements = 0;         // as in the response (an allgather's: rank 0's input)
  std::vector<int64_t> first_dims;  // allgather: every rank's dimension 0
  std::vector<int64_t> splits;      // alltoall: the split matrix, as in its response
  int64_t fusion_bytes = 0;         // what it takes in a fusion buffer (FusionBytes)
  // A grouped op's: a hash of its group's key (GroupHash; 0: not grouped), its place among the
  // group's names and how many they are. The same on every rank: the key names the members.
  uint64_t group = 0;
  int group_index = 0;
  int group_size = 0;
};

// A group key's hash (FNV-1a: the same on every rank and build; never 0).
uint64_t GroupHash(const std::string& key);
// The place of `name` among the members of group `key` (GroupKey, core/group_validation.h;
// 0 if not found), each possibly scoped to one process set.
int GroupIndex(const std::string& key, const std::string& name);

class OpCache {
 public:
  // `size`: the job's. `fast_path`: whether a fast path reads the specs (without one, only the
  // names' ids are kept).
  OpCache(int size, bool fast_path);

  // --- Read. ---
  // The request announcing `entry`: its cache id when the controller's cache holds exactly its
  // metadata, else the metadata.
  Request RequestFor(const TensorEntry& entry) const;
  // The cache id `name` has as of the last response this rank ran, 0 if none.
  uint32_t IdOf(const std::string& name) const;
  // What `id` stands for when a cached op of this rank's may take the fast path with it; null
  // if nothing.
  const FastSpec* Own(uint32_t id) const {
    auto it = own_.find(id);
    return it == own_.end() ? nullptr : &it->second;
  }
  const std::unordered_map<uint32_t, FastSpec>& own() const { return own_; }
  // The ids of the process sets this rank is not in (only name and signature are known),
  // ascending.
  const std::map<uint32_t, FastSpec>& foreign() const { return foreign_; }
  // Counts the foreign ids learned so far: the round messages announce what is new.
  uint64_t foreign_learned() const { return foreign_learned_; }
  // What `id` stands for, this rank's or another set's; null if nothing.
  const FastSpec* SpecOf(uint32_t id) const;
  // Whether `rank`'s readiness counts for `process_set`'s ops (a set not known here: yes).
  bool MemberOf(int process_set, int rank) const;

  // --- Written by the ResponseRunner, as it runs the controller's responses. ---
  // `response` ran on this rank with `entries` (parallel to its names): each name now has the
  // id the response assigns (0 retires its old one); what may take the fast path is learned.
  void Remember(const Response& response, const std::vector<TensorEntry*>& entries);
  // A response of a set this rank is not in: its round messages report the ids ready
  // (docs/FAST-PATH.md, "Process sets"). A name's earlier id, if another, is forgotten; id 0
  // only forgets.
  void RememberForeign(const Response& response);
  // `process_set` has the job ranks `members`.
  void KnowSet(int process_set, const std::vector<int>& members);
  // `process_set` was removed: its ids, this rank's own and foreign, stand for nothing.
  void ForgetSet(int process_set);

 private:
  // Whether the cached names of `response` may take the fast path (docs/FAST-PATH.md): CPU
  // allreduces, broadcasts, allgathers, reducescatters, alltoalls and barriers, of any process
  // set.
  static bool TakesFastPath(const Response& response);
  // What name `index` of `response` stands for; `meta` is this rank's tensor of it.
  static FastSpec SpecOf(const Response& response, size_t index, const TensorMeta& meta);

  // Constant after construction.
  const int size_;
  const bool fast_path_;

  struct Slot {
    uint32_t id;
    TensorMeta meta;
  };
  std::unordered_map<std::string, Slot> by_name_;
  std::unordered_map<uint32_t, FastSpec> own_;
  std::map<uint32_t, FastSpec> foreign_;
  uint64_t foreign_learned_ = 0;
  std::unordered_map<int, std::vector<bool>> set_members_;  // by set, by job rank
};

}  // namespace kolo
