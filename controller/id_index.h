// IdIndex: a ReadinessTable's pending names by cache id, in blocks of 64 consecutive ids with a
// presence word and a flag word each (flag: first announced by this id, so that
// ReadinessTable::AnnounceIds may count a rank in without metadata). A rank's batch of cached
// ids arrives as runs of ascending ids (transport/grpc/id_runs.h), so its 161 ids take 3-4
// block lookups instead of one hash lookup each, and the flags of up to 64 of them are tested
// by one AND (docs/SCALE.md, "The control plane at scale"). A block is freed when its last id
// leaves, so ids that keep growing (an allgather's fresh id each step) hold no memory.
// Header-only; owned by the ReadinessTable; not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>

namespace kolo::controller {

template <typename Entry>
class IdIndex {
 public:
  static constexpr uint32_t kIdsPerBlock = 64;

  struct Block {
    uint64_t present = 0;  // bit i: id (key * 64 + i) is indexed
    uint64_t flagged = 0;  // bit i: ...and was added with `flag`
    std::array<Entry, kIdsPerBlock> entries{};
  };

  static uint32_t BlockOf(uint32_t id) { return id / kIdsPerBlock; }
  static uint64_t BitOf(uint32_t id) { return uint64_t{1} << (id % kIdsPerBlock); }

  // The block of ids [key * 64, key * 64 + 64), or nullptr when none of them is indexed. Valid
  // until the next Remove.
  const Block* FindBlock(uint32_t key) const {
    auto it = blocks_.find(key);
    return it == blocks_.end() ? nullptr : &it->second;
  }
  // `id`'s entry, or nullptr; `*flag` (if not null) says whether it was added flagged.
  const Entry* Find(uint32_t id, bool* flag = nullptr) const {
    const Block* block = FindBlock(BlockOf(id));
    if (block == nullptr || (block->present & BitOf(id)) == 0) return nullptr;
    if (flag != nullptr) *flag = (block->flagged & BitOf(id)) != 0;
    return &block->entries[id % kIdsPerBlock];
  }
  // Indexes `id` unless it is already; returns whether it did.
  bool Add(uint32_t id, const Entry& entry, bool flag) {
    Block& block = blocks_[BlockOf(id)];
    if ((block.present & BitOf(id)) != 0) return false;
    block.present |= BitOf(id);
    if (flag) block.flagged |= BitOf(id);
    block.entries[id % kIdsPerBlock] = entry;
    return true;
  }
  void Remove(uint32_t id) {
    auto it = blocks_.find(BlockOf(id));
    if (it == blocks_.end()) return;
    it->second.present &= ~BitOf(id);
    it->second.flagged &= ~BitOf(id);
    if (it->second.present == 0) blocks_.erase(it);
  }
  size_t block_count() const { return blocks_.size(); }

 private:
  std::unordered_map<uint32_t, Block> blocks_;  // by id / 64
};

}  // namespace kolo::controller
