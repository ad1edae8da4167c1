#include "core/loop/waiting_ops.h"

#include <algorithm>
#include <utility>

namespace kolo {

WaitingOps::WaitingOps(const OpCache* cache, Clock::TimePoint::duration patience)
    : cache_(cache), patience_(patience) {}

bool WaitingOps::Wait(TensorEntry* entry, uint32_t cache_id, TimePoint now) {
  const TensorMeta& meta = entry->meta;
  if (cache_id == 0 || !meta.group.empty() || !meta.device.is_cpu() ||
      diverted_.count(cache_id) != 0) {
    return false;
  }
  const FastSpec* spec = cache_->Own(cache_id);
  if (spec == nullptr || JoinedSet(spec->process_set)) return false;
  // The ops a joined rank cannot stand in for go to the controller from a joined rank, which
  // fails them naming the join, as it would have without the fast path.
  if (joined_ && NeedsEveryRank(cache_id)) return false;
  if (spare_hit_.empty()) {
    hits_[cache_id] = Hit{entry, now, false};
    return true;
  }
  spare_hit_.key() = cache_id;
  spare_hit_.mapped() = Hit{entry, now, false};
  auto inserted = hits_.insert(std::move(spare_hit_));
  if (!inserted.inserted) {  // as operator[]: the new hit replaces the old
    inserted.position->second = inserted.node.mapped();
    spare_hit_ = std::move(inserted.node);
  }
  return true;
}

void WaitingOps::Decided(uint32_t id) {
  auto node = hits_.extract(id);
  if (!node.empty()) spare_hit_ = std::move(node);
}

bool WaitingOps::WaitGroup(const std::vector<TensorEntry*>& entries,
                           const std::vector<uint32_t>& cache_ids, TimePoint now) {
  const uint64_t group = entries.empty() ? 0 : GroupHash(entries.front()->meta.group);
  bool all = !entries.empty() && entries.size() == cache_ids.size();
  for (size_t i = 0; all && i < entries.size(); ++i) {
    const uint32_t id = cache_ids[i];
    const FastSpec* spec = id == 0 ? nullptr : cache_->Own(id);
    all = spec != nullptr && spec->group == group &&
          spec->group_size == static_cast<int>(entries.size()) &&
          entries[i]->meta.device.is_cpu() && diverted_.count(id) == 0 &&
          !JoinedSet(spec->process_set) && !(joined_ && NeedsEveryRank(id)) && hits_.count(id) == 0;
  }
  if (all) {
    for (size_t i = 0; i < entries.size(); ++i) hits_[cache_ids[i]] = Hit{entries[i], now, false};
    return true;
  }
  for (const TensorEntry* entry : entries) DivertChanged(entry->meta.name);
  return false;
}

void WaitingOps::DivertChanged(const std::string& name) {
  const uint32_t old_id = cache_->IdOf(name);
  if (old_id == 0 || cache_->Own(old_id) == nullptr) return;
  diverted_.insert(old_id);
  newly_diverted_.push_back(old_id);
}

void WaitingOps::Join(int process_set) {
  if (process_set == 0) {
    joined_ = true;
    for (const auto& [id, spec] : cache_->own()) {
      if (!JoinDiverts(id, spec) || hits_.count(id) != 0) continue;
      diverted_.insert(id);
      newly_diverted_.push_back(id);
    }
    return;
  }
  if (!JoinedSet(process_set)) joined_sets_.push_back(process_set);
  for (const auto& [id, spec] : cache_->own()) {
    // This rank's own waiting ops of the set are decided first (Hold holds the join).
    if (spec.process_set != process_set || hits_.count(id) != 0) continue;
    diverted_.insert(id);
    newly_diverted_.push_back(id);
  }
}

bool WaitingOps::Hold(TensorEntry* held) {
  switch (held->meta.op) {
    case OpType::kJoin:
      if (hits_.empty() && held_.empty()) return false;
      break;
    case OpType::kRemoveProcessSet:
      // The set's id is the request's root (docs/PROTOCOL.md, "Process sets").
      if (held_.empty() && !HoldsHitOf(held->meta.root)) return false;
      break;
    default:
      return false;
  }
  held_.push_back(held);
  return true;
}

TensorEntry* WaitingOps::TakeReleased() {
  if (held_.empty() || MustHold(held_.front())) return nullptr;
  TensorEntry* released = held_.front();
  held_.pop_front();
  return released;
}

void WaitingOps::Report(RoundMessage* message) {
  message->joined = joined_;
  const std::map<uint32_t, FastSpec>& foreign = cache_->foreign();
  message->ready.reserve(hits_.size() + foreign.size());
  for (auto& [id, hit] : hits_) {
    message->ready.push_back(id);
    hit.announced = true;
  }
  if (!foreign.empty()) {
    // The other sets' ids carry kEveryRankCacheIdBit: past this rank's allreduces, mixed
    // with its own other ops; both runs ascending.
    const size_t own = message->ready.size();
    for (const auto& item : foreign) message->ready.push_back(item.first);
    std::inplace_merge(message->ready.begin(),
                       message->ready.begin() + static_cast<std::ptrdiff_t>(own),
                       message->ready.end());
    foreign_reported_ = cache_->foreign_learned();
  }
  std::sort(newly_diverted_.begin(), newly_diverted_.end());
  newly_diverted_.erase(std::unique(newly_diverted_.begin(), newly_diverted_.end()),
                        newly_diverted_.end());
  message->diverted.swap(newly_diverted_);
}

bool WaitingOps::HasNews() const {
  if (!newly_diverted_.empty() || cache_->foreign_learned() != foreign_reported_) return true;
  return std::any_of(hits_.begin(), hits_.end(),
                     [](const auto& item) { return !item.second.announced; });
}

void WaitingOps::DivertOverdue(TimePoint now, bool everything,
                               std::vector<uint32_t>* to_controller) {
  auto removing = [&](uint32_t id) {
    if (held_.empty()) return false;
    const FastSpec* spec = cache_->Own(id);
    return spec != nullptr && std::any_of(held_.begin(), held_.end(), [&](const TensorEntry* held) {
             return held->meta.op == OpType::kRemoveProcessSet &&
                    held->meta.root == spec->process_set;
           });
  };
  std::vector<uint32_t> ids;
  for (const auto& [id, hit] : hits_) {
    if (everything || now - hit.since >= patience_ || removing(id)) ids.push_back(id);
  }
  for (uint32_t id : ids) {
    Divert(id, to_controller);
    newly_diverted_.push_back(id);
  }
}

void WaitingOps::Divert(uint32_t id, std::vector<uint32_t>* to_controller) {
  diverted_.insert(id);
  auto hit = hits_.find(id);
  if (hit == hits_.end()) return;
  const FastSpec* spec = cache_->Own(id);
  if (spec == nullptr || spec->group == 0) {
    to_controller->push_back(id);
    hits_.erase(hit);
    return;
  }
  std::vector<std::pair<int, uint32_t>> members;  // by place in the group
  for (const auto& [other, waiting] : hits_) {
    const FastSpec* s = cache_->Own(other);
    if (s != nullptr && s->group == spec->group && s->process_set == spec->process_set) {
      members.emplace_back(s->group_index, other);
    }
  }
  std::sort(members.begin(), members.end());
  for (const auto& member : members) {
    diverted_.insert(member.second);
    newly_diverted_.push_back(member.second);
    to_controller->push_back(member.second);
    hits_.erase(member.second);
  }
}

TensorEntry* WaitingOps::Find(uint32_t id) const {
  auto hit = hits_.find(id);
  return hit == hits_.end() ? nullptr : hit->second.entry;
}

void WaitingOps::Handed(const Response& response) {
  for (size_t i = 0; i < response.names.size(); ++i) {
    // The names this rank ran before: the other sets' names are never in the cache's.
    const uint32_t old_id = cache_->IdOf(response.names[i]);
    if (old_id == 0) continue;
    InstanceOver(old_id);
    const uint32_t id = i < response.cache_ids.size() ? response.cache_ids[i] : 0;
    if (!response.is_error() && id != old_id) diverted_.erase(old_id);  // retired
  }
  if (response.is_error()) return;
  if (response.op == OpType::kRemoveProcessSet) {  // the set's id is in the root
    for (const auto& [id, spec] : cache_->foreign()) {
      if (spec.process_set == response.root) diverted_.erase(id);
    }
  }
  if (response.op != OpType::kJoin) return;
  if (response.process_set == 0) {
    joined_ = false;
    return;
  }
  // Its ids take the fast path again after their next instance, which goes to the
  // controller while the id stays diverted here and on the members that saw it diverted.
  joined_sets_.erase(std::remove(joined_sets_.begin(), joined_sets_.end(), response.process_set),
                     joined_sets_.end());
}

bool WaitingOps::JoinDiverts(uint32_t id, const FastSpec& spec) const {
  // A stand-in's spec knows no group (OpCache::Remember), but only a grouped allreduce of the
  // job has kEveryRankCacheIdBit (controller/response_cache.h).
  return NeedsEveryRank(id) && spec.op == OpType::kAllreduce && spec.process_set == 0;
}

void WaitingOps::Drop() {
  hits_.clear();
  held_.clear();
}

bool WaitingOps::JoinedSet(int process_set) const {
  return process_set != 0 &&
         std::find(joined_sets_.begin(), joined_sets_.end(), process_set) != joined_sets_.end();
}

bool WaitingOps::HoldsHitOf(int process_set) const {
  return std::any_of(hits_.begin(), hits_.end(), [&](const auto& item) {
    const FastSpec* spec = cache_->Own(item.first);
    return spec != nullptr && spec->process_set == process_set;
  });
}

bool WaitingOps::MustHold(const TensorEntry* held) const {
  if (held->meta.op == OpType::kRemoveProcessSet) return HoldsHitOf(held->meta.root);
  return !hits_.empty();
}

void WaitingOps::InstanceOver(uint32_t id) {
  const FastSpec* spec = cache_->Own(id);
  if (spec != nullptr && (JoinedSet(spec->process_set) || (joined_ && JoinDiverts(id, *spec)))) {
    newly_diverted_.push_back(id);  // the next instance goes to the controller as well
    return;
  }
  diverted_.erase(id);
}

}  // namespace kolo
