#include "controller/negotiator.h"

#include <algorithm>

#include "controller/fusion_planner.h"
#include "controller/meta_validation.h"

namespace kolo::controller {

Negotiator::Negotiator(const Options& options)
    : options_(options), table_(options.size), cache_(options.cache_capacity) {}

Status Negotiator::AddRequests(int rank, const std::vector<Request>& requests, Clock::TimePoint now,
                               std::vector<NegotiationEvent>* events) {
  TensorMeta resolved;  // a cached allgather's or alltoall's metadata as this rank announced it
  thread_local std::vector<uint32_t> ids;  // a reused scratch list
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].cache_id != 0 && events == nullptr) {
      // Most announcements of a cached step: names pending by these ids, counted in by words
      // (ReadinessTable::AnnounceIds); the first id it refuses takes the path below.
      ids.clear();
      for (size_t j = i; j < requests.size() && requests[j].cache_id != 0; ++j) {
        ids.push_back(requests[j].cache_id);
      }
      const size_t before = ready_.size();
      i += table_.AnnounceIds(rank, ids.data(), ids.size(), &ready_);
      CommitToCache(before);
      if (i == requests.size()) break;
    }
    const Request& request = requests[i];
    const TensorMeta* meta = &request.meta;
    uint32_t id = 0;  // set when `meta` is exactly what the id stands for
    if (request.cache_id != 0) {
      StatusOr<const TensorMeta*> cached = ResolveCacheId(rank, request.cache_id, &resolved, &id);
      KOLO_RETURN_IF_ERROR(cached.status());
      meta = *cached;
    } else {
      KOLO_RETURN_IF_ERROR(CheckWellFormed(rank, *meta));
    }
    const size_t before = ready_.size();
    KOLO_RETURN_IF_ERROR(CheckProcessSetOp(rank, *meta));
    if (meta->process_set != 0) {
      auto set = sets_.find(meta->process_set);
      const int index = set == sets_.end() ? -1 : set->second.IndexOf(rank);
      if (index < 0) {
        return Internal(
            "rank " + std::to_string(rank) + " announced '" + meta->name + "' in process set " +
            std::to_string(meta->process_set) +
            (set == sets_.end() ? ", which does not exist" : ", which it is not a member of"));
      }
      KOLO_RETURN_IF_ERROR(set->second.table->Announce(index, *meta, now, &ready_, events, id));
      AnnotateSetErrors(before, set->first, set->second);
      CommitToCache(before);
      continue;
    }
    KOLO_RETURN_IF_ERROR(table_.Announce(rank, *meta, now, &ready_, events, id));
    CommitToCache(before);
  }
  return Status::Ok();
}

StatusOr<const TensorMeta*> Negotiator::ResolveCacheId(int rank, uint32_t cache_id,
                                                       TensorMeta* resolved, uint32_t* id) const {
  const ResponseCache::Cached* cached = cache_.Lookup(cache_id);
  if (cached == nullptr) {
    return Internal("rank " + std::to_string(rank) + " sent unknown cache id " +
                    std::to_string(cache_id));
  }
  const TensorMeta& meta = cached->meta;
  if (meta.op != OpType::kAllgather && meta.op != OpType::kAlltoall) {
    *id = cache_id;
    return &meta;
  }
  *id = 0;
  // Its dimension 0 (and an alltoall's splits) are the rank's own: by its index in the set the
  // id was agreed in.
  int place = rank;
  if (meta.process_set != 0) {
    auto set = sets_.find(meta.process_set);
    place = set == sets_.end() ? -1 : set->second.IndexOf(rank);
  }
  if (place < 0 || place >= cached->ranks()) {
    return Internal("rank " + std::to_string(rank) + " sent cache id " + std::to_string(cache_id) +
                    " of " + OpTypeName(meta.op) + " '" + meta.name +
                    "', agreed among ranks it is not one of");
  }
  *resolved = cached->MetaOf(place);
  return resolved;
}

void Negotiator::AddShutdown(int rank, std::vector<NegotiationEvent>* events) {
  table_.MarkShutdown(rank, &ready_, events);
  for (auto& [id, set] : sets_) {
    const int index = set.IndexOf(rank);
    if (index < 0) continue;
    const size_t before = ready_.size();
    set.table->MarkShutdown(index, &ready_, events);
    AnnotateSetErrors(before, id, set);
  }
}

void Negotiator::AddGone(int rank, std::vector<NegotiationEvent>* events) {
  table_.MarkGone(rank, &ready_, events);
  for (auto& [id, set] : sets_) {
    const int index = set.IndexOf(rank);
    if (index < 0) continue;
    const size_t before = ready_.size();
    set.table->MarkGone(index, &ready_, events);
    AnnotateSetErrors(before, id, set);
  }
}

int Negotiator::pending_count() const {
  int count = table_.pending_count();
  for (const auto& [id, set] : sets_) count += set.table->pending_count();
  return count;
}

Status Negotiator::CheckProcessSetOp(int rank, const TensorMeta& meta) const {
  const bool set_op = meta.op == OpType::kAddProcessSet || meta.op == OpType::kRemoveProcessSet;
  if (!set_op) return Status::Ok();
  const std::string what =
      "rank " + std::to_string(rank) + " announced " + OpTypeName(meta.op) + " with ";
  if (meta.process_set != 0) return Internal(what + "a process set of its own");
  if (meta.op == OpType::kAddProcessSet) {
    bool ascending = !meta.splits.empty();
    for (size_t i = 0; i < meta.splits.size() && ascending; ++i) {
      ascending =
          meta.splits[i] >= (i == 0 ? 0 : meta.splits[i - 1] + 1) && meta.splits[i] < options_.size;
    }
    if (!ascending) {
      return Internal(what + "members " + ShapeToString(meta.splits) +
                      " that are not ascending ranks of the job");
    }
  }
  return Status::Ok();
}

std::vector<WatchedTable> Negotiator::WatchedTables() const {
  std::vector<WatchedTable> tables{{&table_, nullptr}};
  for (const auto& [id, set] : sets_) tables.push_back({set.table.get(), &set.ranks});
  return tables;
}

int Negotiator::ProcessSet::IndexOf(int rank) const {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
  return it != ranks.end() && *it == rank ? static_cast<int>(it - ranks.begin()) : -1;
}

void Negotiator::AnnotateSetErrors(size_t first, int id, const ProcessSet& set) {
  for (size_t i = first; i < ready_.size(); ++i) {
    if (!ready_[i].is_error()) continue;
    std::string ranks;
    for (size_t r = 0; r < set.ranks.size(); ++r) {
      ranks += (r ? ", " : "") + std::to_string(set.ranks[r]);
    }
    ready_[i].error += " (ranks counted within process set " + std::to_string(id) +
                       ", whose members are ranks [" + ranks + "])";
  }
}

std::string Negotiator::PendingText(const ProcessSet& set) const {
  std::vector<PendingName> pending = set.table->WaitingSince(Clock::TimePoint::max());
  std::string text;
  for (size_t i = 0; i < pending.size() && i < 3; ++i) {
    text += (i ? ", '" : "'") + pending[i].name + "'";
  }
  if (pending.size() > 3) text += ", ...";
  return text;
}

void Negotiator::DecideProcessSets() {
  for (ReadyTensor& t : ready_) {
    if (t.is_error()) continue;
    if (t.meta.op == OpType::kAddProcessSet) {
      const int id = next_set_id_++;
      ProcessSet set;
      set.ranks.assign(t.meta.splits.begin(), t.meta.splits.end());
      // Its table counts members by place; its timeline events name job ranks.
      set.table = std::make_unique<ReadinessTable>(static_cast<int>(set.ranks.size()), set.ranks);
      // A rank that already shut down submits nothing more, in this set either.
      std::vector<ReadyTensor> none;  // a new table has no pending name to fail
      for (size_t i = 0; i < set.ranks.size(); ++i) {
        if (table_.has_shut_down(set.ranks[i])) {
          set.table->MarkShutdown(static_cast<int>(i), &none);
        }
      }
      sets_.emplace(id, std::move(set));
      t.meta.root = id;
      t.splits = t.meta.splits;  // the response carries the members
    } else if (t.meta.op == OpType::kRemoveProcessSet) {
      const std::string what = "remove_process_set(" + std::to_string(t.meta.root) + ")";
      auto set = sets_.find(t.meta.root);
      if (set == sets_.end()) {
        t.error = what + ": process set " + std::to_string(t.meta.root) + " does not exist";
        t.error_code = StatusCode::kInvalidArgument;
      } else if (set->second.table->pending_count() > 0) {
        t.error = what + ": process set " + std::to_string(t.meta.root) + " still has " +
                  std::to_string(set->second.table->pending_count()) +
                  " op(s) in flight that not every member submitted (" + PendingText(set->second) +
                  "); complete them first";
        t.error_code = StatusCode::kFailedPrecondition;
      } else {
        sets_.erase(set);
      }
    }
  }
}

void Negotiator::CommitToCache(size_t first) {
  // Ids are committed when a name completes, not when it is planned, so that readiness order
  // alone decides them; no rank can use an id before the response that carries it arrives.
  for (size_t i = first; i < ready_.size(); ++i) {
    // An allgather's id stands for every rank's dimension 0 as well, an alltoall's for the
    // split matrix; a rank whose own changed announces it in full (its cached metadata no
    // longer matches), and the name gets a fresh id (an alltoall none until its new splits
    // repeat: ResponseCache::Commit). Alltoalls whose splits change every step (mixtures of
    // experts) go to the controller every step, as they did before they had ids.
    if (!ready_[i].is_error()) {
      ready_[i].cache_id = cache_.Commit(ready_[i].meta, ready_[i].first_dims, ready_[i].splits);
    }
  }
}

std::vector<Response> Negotiator::Plan() {
  return Plan(options_.fusion_threshold_bytes);
}

std::vector<Response> Negotiator::Plan(int64_t fusion_threshold_bytes) {
  DecideProcessSets();
  std::vector<Response> responses = PlanResponses(ready_, fusion_threshold_bytes, &next_seq_);
  ready_.clear();
  return responses;
}

}  // namespace kolo::controller
