#include "controller/readiness_table.h"

#include <utility>

#include "controller/meta_validation.h"

namespace kolo::controller {

ReadinessTable::ReadinessTable(int size, std::vector<int> event_ranks)
    : size_(size),
      event_ranks_(std::move(event_ranks)),
      announced_(size),
      shut_down_(size, false),
      joined_(size, false) {}

void ReadinessTable::Note(std::vector<NegotiationEvent>* events, NegotiationEvent::Kind kind,
                          const std::string& name, OpType op, int rank) const {
  if (events == nullptr) return;
  if (rank >= 0 && rank < static_cast<int>(event_ranks_.size())) {
    rank = event_ranks_[static_cast<size_t>(rank)];
  }
  events->push_back(NegotiationEvent{kind, name, op, rank});
}

ReadinessTable::PendingMap::iterator ReadinessTable::Find(const TensorMeta& meta,
                                                          uint32_t cache_id) {
  if (cache_id != 0) {
    if (const IdEntry* found = by_id_.Find(cache_id); found != nullptr) return found->it;
  }
  return pending_.find(meta.name);
}

Status ReadinessTable::Announce(int rank, const TensorMeta& meta, Clock::TimePoint now,
                                std::vector<ReadyTensor>* ready,
                                std::vector<NegotiationEvent>* events, uint32_t cache_id) {
  using Kind = NegotiationEvent::Kind;
  const auto who = [rank] { return "rank " + std::to_string(rank); };
  if (rank < 0 || rank >= size_) {
    return Internal(who() + " is out of range for a job of " + std::to_string(size_) + " ranks");
  }
  if (shut_down_[rank]) {
    return Internal(who() + " announced '" + meta.name + "' after its shutdown notice");
  }
  auto it = Find(meta, cache_id);
  if (it != pending_.end() && announced_.Has(rank, it->second.slot)) {
    return Internal(who() + " announced '" + meta.name + "' twice before it was ready");
  }
  if (it == pending_.end()) {
    it = Open(rank, meta, now, cache_id, ready, events);
    if (it == pending_.end()) return Status::Ok();  // failed at once
  } else {
    AddToOpen(it, rank, meta, cache_id);
  }
  Pending& entry = it->second;
  announced_.Mark(rank, entry.slot);
  Note(events, Kind::kAnnounce, meta.name, entry.first.op, rank);
  const bool joins = meta.op == OpType::kJoin && !joined_[rank];
  if (joins) {
    joined_[rank] = true;
    ++num_joined_;
  }
  if (IsComplete(entry)) {
    ReadyTensor done = Finish(entry);
    if (entry.first.op == OpType::kJoin) {  // every rank joined: `rank` was the last
      done.meta.root = rank;
      joined_.assign(size_, false);
      num_joined_ = 0;
    }
    ready->push_back(std::move(done));
    Note(events, Kind::kEnd, meta.name, entry.first.op, rank);
    Erase(it);
  }
  if (joins) SettleAfterJoin(ready, events);
  return Status::Ok();
}

bool ReadinessTable::AnnounceById(int rank, uint32_t cache_id, std::vector<ReadyTensor>* ready) {
  if (num_joined_ != 0 || rank < 0 || rank >= size_ || shut_down_[rank]) return false;
  bool by_same_id = false;
  const IdEntry* found = by_id_.Find(cache_id, &by_same_id);
  if (found == nullptr || !by_same_id || announced_.Has(rank, found->slot)) return false;
  if (announced_.Mark(rank, found->slot) == size_) {
    const PendingMap::iterator it = found->it;
    ready->push_back(Finish(it->second));
    Erase(it);
  }
  return true;
}

size_t ReadinessTable::AnnounceIds(int rank, const uint32_t* ids, size_t count,
                                   std::vector<ReadyTensor>* ready) {
  using Index = IdIndex<IdEntry>;
  if (num_joined_ != 0 || rank < 0 || rank >= size_ || shut_down_[rank]) return 0;
  size_t done = 0;
  while (done < count) {
    const uint32_t key = Index::BlockOf(ids[done]);
    const Index::Block* block = by_id_.FindBlock(key);
    if (block == nullptr) return done;
    // The stretch of ascending ids in this block, as a word; one AND tells whether every one
    // of them is pending by the same id.
    size_t end = done + 1;
    while (end < count && Index::BlockOf(ids[end]) == key && ids[end] > ids[end - 1]) ++end;
    uint64_t mask = 0;
    for (size_t i = done; i < end; ++i) mask |= Index::BitOf(ids[i]);
    const uint64_t refused = mask & ~block->flagged;
    size_t limit = end;  // the ids before the first refused one (they ascend)
    if (refused != 0) {
      limit = done;
      while ((Index::BitOf(ids[limit]) & refused) == 0) ++limit;
    }
    bool completed = false;  // a name completed, which may have freed the block
    for (; done < limit && !completed; ++done) {
      const IdEntry& entry = block->entries[ids[done] % Index::kIdsPerBlock];
      if (announced_.Has(rank, entry.slot)) return done;  // twice: Announce reports it
      if (announced_.Mark(rank, entry.slot) == size_) {
        const PendingMap::iterator it = entry.it;
        ready->push_back(Finish(it->second));
        Erase(it);
        completed = true;
      }
    }
    if (!completed && refused != 0) return done;  // ids[done] is the refused one
  }
  return done;
}

ReadinessTable::PendingMap::iterator ReadinessTable::Open(int rank, const TensorMeta& meta,
                                                          Clock::TimePoint now, uint32_t cache_id,
                                                          std::vector<ReadyTensor>* ready,
                                                          std::vector<NegotiationEvent>* events) {
  using Kind = NegotiationEvent::Kind;
  Note(events, Kind::kBegin, meta.name, meta.op, -1);
  // A new name cannot complete without the ranks that left: fail it on its own, now.
  // (Pending names already hold every departed rank's announcement; see MarkShutdown.)
  std::string error;
  StatusCode code = StatusCode::kOk;
  if (const int departed = FirstDepartedMissing(nullptr); departed >= 0) {
    error = ShutdownError(departed, meta.name);
    code = StatusCode::kShutdown;
  } else if (std::string conflict = JoinConflict(meta); !conflict.empty()) {
    error = std::move(conflict);
    code = StatusCode::kFailedPrecondition;
  }
  if (!error.empty()) {
    ready->push_back(ReadyTensor{meta, std::move(error), 0, code});
    Note(events, Kind::kAnnounce, meta.name, meta.op, rank);
    Note(events, Kind::kEnd, meta.name, meta.op, -1);
    return pending_.end();
  }
  Pending entry;
  entry.arrival = next_arrival_++;
  entry.first_seen = now;
  entry.first_rank = rank;
  entry.first = meta;
  entry.first_id = cache_id;
  entry.id_key = cache_id;
  entry.slot = announced_.Open();
  by_arrival_.emplace(entry.arrival, meta.name);
  auto it = pending_.emplace(meta.name, std::move(entry)).first;
  if (cache_id != 0) by_id_.Add(cache_id, IdEntry{it, it->second.slot}, meta.op != OpType::kJoin);
  return it;
}

void ReadinessTable::AddToOpen(PendingMap::iterator it, int rank, const TensorMeta& meta,
                               uint32_t cache_id) {
  Pending& entry = it->second;
  if ((cache_id == 0 || cache_id != entry.first_id) && meta != entry.first) {
    entry.differing.emplace(rank, meta);
  }
  if (cache_id != 0 && entry.id_key == 0) {
    entry.id_key = cache_id;  // first announced in full: found by id from now on
    by_id_.Add(cache_id, IdEntry{it, entry.slot}, /*flag=*/false);
  }
}

bool ReadinessTable::IsComplete(const Pending& entry) const {
  if (announced_.count(entry.slot) == size_) return true;
  if (entry.first.op != OpType::kAllreduce || num_joined_ == 0) return false;
  for (int rank = 0; rank < size_; ++rank) {
    if (!announced_.Has(rank, entry.slot) && !joined_[rank]) return false;
  }
  return true;
}

std::string ReadinessTable::JoinConflict(const TensorMeta& meta) const {
  if (num_joined_ == 0 || meta.op == OpType::kAllreduce || meta.op == OpType::kJoin) return "";
  int joined = 0;
  while (!joined_[joined]) ++joined;
  return OpTypeName(meta.op) + " '" + meta.name + "' cannot run while rank " +
         std::to_string(joined) + " has joined: join supports only allreduce";
}

void ReadinessTable::SettleAfterJoin(std::vector<ReadyTensor>* ready,
                                     std::vector<NegotiationEvent>* events) {
  using Kind = NegotiationEvent::Kind;
  std::vector<std::string> names;  // in arrival order, so responses keep that order
  for (const auto& [arrival, name] : by_arrival_) names.push_back(name);
  for (const std::string& name : names) {
    auto it = pending_.find(name);
    const Pending& entry = it->second;
    if (std::string conflict = JoinConflict(entry.first); !conflict.empty()) {
      ready->push_back(ReadyTensor{entry.first, conflict, 0, StatusCode::kFailedPrecondition});
    } else if (entry.first.op == OpType::kAllreduce && IsComplete(entry)) {
      ready->push_back(Finish(entry));
    } else {
      continue;
    }
    Note(events, Kind::kEnd, name, entry.first.op, -1);
    Erase(it);
  }
}

void ReadinessTable::Erase(PendingMap::iterator it) {
  by_arrival_.erase(it->second.arrival);
  if (it->second.id_key != 0) by_id_.Remove(it->second.id_key);
  announced_.Close(it->second.slot);
  pending_.erase(it);
}

ReadyTensor ReadinessTable::Finish(const Pending& entry) const {
  auto meta_of = [&entry](int rank) -> const TensorMeta& {
    auto it = entry.differing.find(rank);
    return it == entry.differing.end() ? entry.first : it->second;
  };
  const TensorMeta& reference = meta_of(0);
  for (int rank = 1; rank < size_ && !entry.differing.empty(); ++rank) {
    std::string error = DescribeMismatch(0, reference, rank, meta_of(rank));
    if (!error.empty()) return ReadyTensor{reference, std::move(error)};
  }
  ReadyTensor ready{reference, ""};
  if (reference.op == OpType::kAllgather) {
    for (int rank = 0; rank < size_; ++rank) ready.first_dims.push_back(meta_of(rank).shape[0]);
  }
  if (reference.op == OpType::kAlltoall) {
    for (int rank = 0; rank < size_; ++rank) {
      const std::vector<int64_t>& splits = meta_of(rank).splits;
      if (static_cast<int>(splits.size()) != size_) {
        return ReadyTensor{reference, "Alltoall '" + reference.name + "': rank " +
                                          std::to_string(rank) + " sent " +
                                          std::to_string(splits.size()) + " splits for " +
                                          std::to_string(size_) + " ranks"};
      }
      ready.splits.insert(ready.splits.end(), splits.begin(), splits.end());
    }
  }
  return ready;
}

void ReadinessTable::MarkShutdown(int rank, std::vector<ReadyTensor>* ready,
                                  std::vector<NegotiationEvent>* events) {
  if (rank < 0 || rank >= size_ || shut_down_[rank]) return;
  shut_down_[rank] = true;
  ++num_shut_down_;
  // Names `rank` never announced can no longer complete; the ones it did stay pending, since
  // a rank keeps executing decided ops until the job-wide Shutdown.
  std::vector<PendingMap::iterator> doomed;  // oldest first
  for (const auto& [arrival, name] : by_arrival_) {
    auto it = pending_.find(name);
    if (!announced_.Has(rank, it->second.slot)) doomed.push_back(it);
  }
  for (auto it : doomed) {
    ready->push_back(
        ReadyTensor{it->second.first, ShutdownError(rank, it->first), 0, StatusCode::kShutdown});
    Note(events, NegotiationEvent::Kind::kEnd, it->first, it->second.first.op, -1);
    Erase(it);
  }
}

void ReadinessTable::MarkGone(int rank, std::vector<ReadyTensor>* ready,
                              std::vector<NegotiationEvent>* events) {
  if (rank < 0 || rank >= size_ || !shut_down_[rank]) return;
  while (!by_arrival_.empty()) {
    auto it = pending_.find(by_arrival_.begin()->second);
    ready->push_back(ReadyTensor{it->second.first,
                                 "rank " + std::to_string(rank) +
                                     " left the job (its shutdown() stopped waiting for the "
                                     "others) before '" +
                                     it->first + "' could run",
                                 0, StatusCode::kShutdown});
    Note(events, NegotiationEvent::Kind::kEnd, it->first, it->second.first.op, -1);
    Erase(it);
  }
}

int ReadinessTable::FirstDepartedMissing(const Pending* entry) const {
  if (num_shut_down_ == 0) return -1;
  for (int rank = 0; rank < size_; ++rank) {
    if (shut_down_[rank] && (entry == nullptr || !announced_.Has(rank, entry->slot))) return rank;
  }
  return -1;
}

std::string ReadinessTable::ShutdownError(int departed, const std::string& name) const {
  return "rank " + std::to_string(departed) + " called shutdown() before submitting '" + name + "'";
}

std::vector<int> ReadinessTable::MissingRanks(const std::string& name) const {
  std::vector<int> missing;
  auto it = pending_.find(name);
  if (it == pending_.end()) return missing;
  for (int rank = 0; rank < size_; ++rank) {
    if (!announced_.Has(rank, it->second.slot)) missing.push_back(rank);
  }
  return missing;
}

std::optional<Clock::TimePoint> ReadinessTable::oldest_first_seen() const {
  if (by_arrival_.empty()) return std::nullopt;
  return pending_.at(by_arrival_.begin()->second).first_seen;
}

std::vector<PendingName> ReadinessTable::WaitingSince(Clock::TimePoint cutoff) const {
  std::vector<PendingName> waiting;
  for (const auto& [arrival, name] : by_arrival_) {
    const Pending& entry = pending_.at(name);
    if (entry.first_seen > cutoff) break;  // arrival order is first-seen order
    PendingName pending{name, entry.first.op, entry.first_seen, {}};
    for (int rank = 0; rank < size_; ++rank) {
      if (!announced_.Has(rank, entry.slot)) pending.missing.push_back(rank);
    }
    waiting.push_back(std::move(pending));
  }
  return waiting;
}

}  // namespace kolo::controller
