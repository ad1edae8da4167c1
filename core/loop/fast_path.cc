#include "core/loop/fast_path.h"

#include <algorithm>

#include "core/fusion/fusion_rule.h"
#include "core/hierarchy_rule.h"
#include "core/op_text.h"

namespace kolo {
namespace {

FusionKey KeyOf(const FastSpec& spec) {
  FusionKey key;
  key.op = spec.op;
  key.dtype = spec.dtype;
  key.device = Device::Cpu();
  key.reduce_op = spec.reduce_op;
  key.prescale = spec.prescale;
  key.postscale = spec.postscale;
  key.process_set = spec.process_set;
  return key;
}

// A round runs at most KOLO_CACHE_CAPACITY <= 10^6 < 2^20 tensors, so its batches fit below
// bit 20; the groups stay apart from controller sequence numbers and below 2^53, so JSON
// readers (whose numbers are doubles) read them exactly for the first 2^32 rounds.
uint64_t FastGroup(uint64_t round, uint64_t batch) {
  return (uint64_t{1} << 52) + (round << 20) + batch;
}

}  // namespace

FastPath::FastPath(const Options& options, TraceSink* negotiation_sink)
    : options_(options),
      divert_after_seconds_(DivertAfterSeconds(options)),
      rounds_(options.rank, options.size),
      round_trace_(negotiation_sink, options.size),
      lane_closed_(options.size, false),
      peer_stopping_(options.size, false) {}

double FastPath::DivertAfterSeconds(const Options& options) {
  return options.stall_check_seconds > 0 ? std::min(1.0, options.stall_check_seconds / 2) : 1.0;
}

void FastPath::Learn(uint32_t id, FastSpec spec) {
  specs_[id] = std::move(spec);
}

void FastPath::LearnForeign(uint32_t id, FastSpec spec) {
  // A name's earlier id is retired (its members no longer report it), as is the name's id
  // when `id` is 0. Names are scoped by set, so a name stands for one id at a time. Only a
  // response of another set gets here, not a small op's path.
  for (auto it = foreign_.begin(); it != foreign_.end(); ++it) {
    if (it->first != id && it->second.name == spec.name) {
      foreign_.erase(it);
      break;
    }
  }
  if (id != 0 && foreign_.emplace(id, std::move(spec)).second) foreign_news_ = true;
}

void FastPath::KnowSet(int process_set, const std::vector<int>& members) {
  std::vector<bool>& known = set_members_[process_set];
  known.assign(static_cast<size_t>(options_.size), false);
  for (int r : members) {
    if (r >= 0 && r < options_.size) known[static_cast<size_t>(r)] = true;
  }
}

const FastSpec* FastPath::SpecOf(uint32_t id) const {
  auto own = specs_.find(id);
  if (own != specs_.end()) return &own->second;
  auto other = foreign_.find(id);
  return other == foreign_.end() ? nullptr : &other->second;
}

bool FastPath::MemberOf(int process_set, int rank) const {
  if (rank < 0 || rank >= options_.size) return false;
  if (process_set == 0) return true;
  auto set = set_members_.find(process_set);
  return set == set_members_.end() || set->second[static_cast<size_t>(rank)];
}

void FastPath::Forget(uint32_t id) {
  specs_.erase(id);
  foreign_.erase(id);
  diverted_.erase(id);  // retired: never offered again (ids are not reused)
}

void FastPath::ForgetSet(int process_set) {
  for (auto it = specs_.begin(); it != specs_.end();) {
    it = it->second.process_set == process_set ? specs_.erase(it) : std::next(it);
  }
  for (auto it = foreign_.begin(); it != foreign_.end();) {
    if (it->second.process_set == process_set) {
      diverted_.erase(it->first);
      it = foreign_.erase(it);
    } else {
      ++it;
    }
  }
  set_members_.erase(process_set);
}

void FastPath::InstanceOver(uint32_t id) {
  auto spec = specs_.find(id);
  if (spec != specs_.end() && JoinedSet(spec->second.process_set)) {
    newly_diverted_.push_back(id);  // the next instance goes to the controller as well
    return;
  }
  diverted_.erase(id);
}

void FastPath::JoinSet(int process_set, bool joined) {
  auto at = std::find(joined_sets_.begin(), joined_sets_.end(), process_set);
  if (!joined) {
    if (at != joined_sets_.end()) joined_sets_.erase(at);
    // Its ids take the fast path again after their next instance, which goes to the
    // controller while the id stays diverted here and on the members that saw it diverted.
    return;
  }
  if (at == joined_sets_.end()) joined_sets_.push_back(process_set);
  for (const auto& [id, spec] : specs_) {
    // This rank's own waiting ops of the set are decided first (HoldJoin holds the join).
    if (spec.process_set != process_set || hits_.count(id) != 0) continue;
    diverted_.insert(id);
    newly_diverted_.push_back(id);
  }
}

bool FastPath::JoinedSet(int process_set) const {
  return process_set != 0 &&
         std::find(joined_sets_.begin(), joined_sets_.end(), process_set) != joined_sets_.end();
}

bool FastPath::Offer(TensorEntry* entry, uint32_t cache_id, TimePoint now) {
  const TensorMeta& meta = entry->meta;
  if (stopping_ || closed_ || cache_id == 0 || !meta.group.empty() || !meta.device.is_cpu() ||
      diverted_.count(cache_id) != 0) {
    return false;
  }
  auto spec = specs_.find(cache_id);
  if (spec == specs_.end() || JoinedSet(spec->second.process_set)) return false;
  // The ops a joined rank cannot stand in for go to the controller from a joined rank, which
  // fails them naming the join, as it would have without the fast path.
  if (joined_ && NeedsEveryRank(cache_id)) return false;
  hits_[cache_id] = Hit{entry, now, false};
  round_trace_.Ready(options_.rank, cache_id, meta.name, meta.op, now);
  return true;
}

void FastPath::DivertChanged(uint32_t old_id) {
  if (specs_.count(old_id) == 0) return;
  diverted_.insert(old_id);
  newly_diverted_.push_back(old_id);
}

bool FastPath::HoldJoin(TensorEntry* join) {
  if (hits_.empty() && held_.empty()) return false;
  held_.push_back(join);
  return true;
}

bool FastPath::HoldsHitOf(int process_set) const {
  return std::any_of(hits_.begin(), hits_.end(), [&](const auto& item) {
    auto spec = specs_.find(item.first);
    return spec != specs_.end() && spec->second.process_set == process_set;
  });
}

bool FastPath::HoldRemoval(TensorEntry* removal) {
  // The set's id is the request's root (docs/PROTOCOL.md, "Process sets").
  if (held_.empty() && !HoldsHitOf(removal->meta.root)) return false;
  held_.push_back(removal);
  return true;
}

bool FastPath::MustHold(const TensorEntry* held) const {
  if (held->meta.op == OpType::kRemoveProcessSet) return HoldsHitOf(held->meta.root);
  return !hits_.empty();
}

TensorEntry* FastPath::TakeReleased() {
  if (held_.empty() || MustHold(held_.front())) return nullptr;
  TensorEntry* released = held_.front();
  held_.pop_front();
  return released;
}

Status FastPath::ReceiveResponse(Response response) {
  if (response.seq != received_seq_ + 1) {
    return Internal("protocol error: response " + std::to_string(response.seq) + " arrived after " +
                    std::to_string(received_seq_));
  }
  received_seq_ = response.seq;
  received_.push_back(std::move(response));
  return Status::Ok();
}

Status FastPath::ReceiveRound(int from, RoundMessage message, TimePoint now) {
  if (message.notice) return rounds_.Receive(from, std::move(message));  // news of a round only
  // Under the dissemination pattern a message combines several ranks': `stopping` then says
  // that one of them stopped (and every op goes to the controller anyway), and the timeline
  // sees readiness when it reaches rank 0, from the rank that relayed it.
  if (from >= 0 && from < options_.size) peer_stopping_[from] = message.stopping;
  if (round_trace_.on()) {
    for (uint32_t id : message.ready) {
      // A rank outside an op's set reports it ready in every round: not readiness.
      const FastSpec* spec = SpecOf(id);
      if (spec != nullptr && MemberOf(spec->process_set, from)) {
        round_trace_.Ready(from, id, spec->name, spec->op, now);
      }
    }
  }
  return rounds_.Receive(from, std::move(message));
}

void FastPath::PeerClosed(int rank) {
  if (rank < 0 || rank >= options_.size) return;
  lane_closed_[rank] = true;
  // Its messages came before its end of stream: a peer that said `stopping` and then closed
  // left after shutdown() (e.g. it stopped waiting for the others); rounds go on without it.
  if (peer_stopping_[rank]) rounds_.Depart(rank);
}

Status FastPath::Advance(TimePoint now, Outbox* out) {
  // Only between rounds: an id in this rank's open round message may still be decided runnable.
  if (!rounds_.waiting()) DivertWaiting(now, out);
  if (rounds_.must_answer() || (!rounds_.waiting() && NeedRound())) {
    out->round = MakeRound(now);
    out->progress = true;
  }
  while (std::optional<RoundDecision> decision = rounds_.TakeDecision()) {
    KOLO_RETURN_IF_ERROR(ApplyDecision(std::move(*decision), now, out));
    out->progress = true;
  }
  // After the decisions: a round completes only once this rank's last step went out, and that
  // send must not wait for the next pass.
  rounds_.TakeSends(&out->sends);
  if (!out->sends.empty()) out->progress = true;
  return Status::Ok();
}

bool FastPath::NeedRound() const {
  if (received_seq_ > decided_seq_ || !newly_diverted_.empty() || foreign_news_) return true;
  if (joined_ != last_sent_.joined || stopping_ != last_sent_.stopping) return true;
  return std::any_of(hits_.begin(), hits_.end(),
                     [](const auto& item) { return !item.second.announced; });
}

uint64_t FastPath::FusionThreshold() const {
  // With KOLO_AUTOTUNE rank 0's tuner sets the threshold and every other rank sends "no
  // limit": the round's rule (the smallest sent) then gives every rank the tuned one.
  if (autotuner_ != nullptr) return static_cast<uint64_t>(autotuner_->fusion_threshold_bytes());
  if (options_.autotune) return UINT64_MAX;
  return static_cast<uint64_t>(std::max<int64_t>(options_.fusion_threshold_bytes, 0));
}

uint64_t FastPath::HierarchyMinBytes() const {
  // The same rule for the hierarchical choice, while rank 0's tuner tunes it (it does with
  // KOLO_HIERARCHICAL=auto on several hosts); a rank without KOLO_AUTOTUNE sends its own rule.
  if (autotuner_ != nullptr && autotuner_->tunes_hierarchy()) {
    return autotuner_->hierarchy_min_bytes();
  }
  if (autotuner_ == nullptr && options_.autotune) return kHierarchyFlat;
  return ConfiguredHierarchyMinBytes(options_.hierarchical);
}

RoundMessage FastPath::MakeRound(TimePoint now) {
  RoundMessage message;
  message.received_seq = received_seq_;
  message.joined = joined_;
  message.stopping = stopping_;
  message.fusion_threshold = FusionThreshold();
  message.hierarchy_min_bytes = HierarchyMinBytes();
  message.ready.reserve(hits_.size() + foreign_.size());
  for (auto& [id, hit] : hits_) {
    message.ready.push_back(id);
    hit.announced = true;
  }
  if (!foreign_.empty()) {
    // The other sets' ids carry kEveryRankCacheIdBit: past this rank's allreduces, mixed
    // with its own other ops; both runs ascending.
    const size_t own = message.ready.size();
    for (const auto& item : foreign_) message.ready.push_back(item.first);
    std::inplace_merge(message.ready.begin(),
                       message.ready.begin() + static_cast<std::ptrdiff_t>(own),
                       message.ready.end());
    foreign_news_ = false;
  }
  std::sort(newly_diverted_.begin(), newly_diverted_.end());
  newly_diverted_.erase(std::unique(newly_diverted_.begin(), newly_diverted_.end()),
                        newly_diverted_.end());
  message.diverted.swap(newly_diverted_);
  rounds_.RecordSent(&message, now);
  last_sent_ = message;
  return message;
}

// What must not wait for a round any longer goes to the controller: everything once this rank
// or a peer is stopping, else what waited longer than divert_after_seconds for the other ranks
// (the controller's stall inspector then sees it and names who is late).
void FastPath::DivertWaiting(TimePoint now, Outbox* out) {
  const auto patience = DurationOf(divert_after_seconds_);
  auto removing = [&](uint32_t id) {
    if (held_.empty()) return false;
    auto spec = specs_.find(id);
    return spec != specs_.end() &&
           std::any_of(held_.begin(), held_.end(), [&](const TensorEntry* held) {
             return held->meta.op == OpType::kRemoveProcessSet &&
                    held->meta.root == spec->second.process_set;
           });
  };
  std::vector<uint32_t> ids;
  for (const auto& [id, hit] : hits_) {
    if (stopping_ || closed_ || now - hit.since >= patience || removing(id)) ids.push_back(id);
  }
  for (uint32_t id : ids) {
    Divert(id, out);
    newly_diverted_.push_back(id);
  }
}

void FastPath::Divert(uint32_t id, Outbox* out) {
  diverted_.insert(id);
  auto hit = hits_.find(id);
  if (hit == hits_.end()) return;
  out->to_controller.push_back(id);
  hits_.erase(hit);
}

Status FastPath::ApplyDecision(RoundDecision decision, TimePoint now, Outbox* out) {
  decided_seq_ = std::max(decided_seq_, decision.run_through_seq);
  if (decision.stopping) closed_ = true;
  for (const std::vector<uint32_t>* ids : {&decision.runnable, &decision.diverted}) {
    for (uint32_t id : *ids) {
      const FastSpec* spec = SpecOf(id);
      if (spec != nullptr) round_trace_.Closed(id, spec->name, ids == &decision.runnable, now);
    }
  }
  for (uint32_t id : decision.diverted) Divert(id, out);
  Decided decided{std::move(decision), {}, {}, {}, 0, 0};
  const RoundDecision& taken = decided.decision;
  // Built for an error only: this runs once per round, a small op's critical path.
  auto round = [&] { return "fast path: round " + std::to_string(taken.round); };
  for (uint32_t id : taken.runnable) {
    const bool mine = std::binary_search(last_sent_.ready.begin(), last_sent_.ready.end(), id);
    auto hit = hits_.find(id);
    // Another set's: its members run it. (Or it was when this rank reported it, and a response
    // since retired the id: then its members cannot all have reported it, but nothing of it
    // is this rank's either way.)
    if (foreign_.count(id) != 0 || (mine && hit == hits_.end() && specs_.count(id) == 0)) {
      continue;
    }
    if (mine && (hit == hits_.end() || specs_.count(id) == 0)) {
      return Internal(round() + " decided on cache id " + std::to_string(id) +
                      ", which this rank reported ready but no longer holds");
    }
    if (!mine && (!last_sent_.joined || NeedsEveryRank(id) || specs_.count(id) == 0)) {
      return Internal(round() + " decided on cache id " + std::to_string(id) +
                      ", which this rank neither reported ready nor can stand in for");
    }
    decided.ids.push_back(id);
    decided.entries.push_back(mine ? hit->second.entry : nullptr);  // null: joined, zeros
    decided.specs.push_back(specs_.at(id));
    if (mine) hits_.erase(hit);
  }
  OrderBySet(&decided);
  decided_.push_back(std::move(decided));
  return Status::Ok();
}

bool FastPath::NextWork(TimePoint now, Work* work) {
  while (!decided_.empty()) {
    Decided& front = decided_.front();
    if (handed_seq_ < front.decision.run_through_seq) {
      if (received_.empty()) {
        if (!blocked_) blocked_since_ = now;
        blocked_ = true;
        return false;
      }
      work->from_controller = true;
      work->response = std::move(received_.front());
      work->entries.clear();
      received_.pop_front();
      handed_seq_ = work->response.seq;
      return true;
    }
    blocked_ = false;
    if (front.next < front.ids.size()) {
      CutHits(work);
      return true;
    }
    decided_.pop_front();
  }
  return false;
}

void FastPath::OrderBySet(Decided* decided) {
  const std::vector<FastSpec>& specs = decided->specs;
  if (std::is_sorted(specs.begin(), specs.end(), [](const FastSpec& a, const FastSpec& b) {
        return a.process_set < b.process_set;
      })) {
    return;  // the common case (the job's set alone): nothing to move
  }
  std::vector<size_t> order(specs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return specs[a].process_set < specs[b].process_set; });
  Decided sorted{decided->decision, {}, {}, {}, 0, 0};
  for (size_t i : order) {
    sorted.ids.push_back(decided->ids[i]);
    sorted.entries.push_back(decided->entries[i]);
    sorted.specs.push_back(std::move(decided->specs[i]));
  }
  decided->ids = std::move(sorted.ids);
  decided->entries = std::move(sorted.entries);
  decided->specs = std::move(sorted.specs);
}

// The front decision's next batch of cached ops, by set and in ascending id order, fused under
// the same rule as the controller's (core/fusion/fusion_rule.h) and the round's smallest threshold.
void FastPath::CutHits(Work* work) {
  Decided& decided = decided_.front();
  const RoundDecision& decision = decided.decision;
  const uint64_t threshold = std::min<uint64_t>(decision.fusion_threshold, INT64_MAX);
  FusionBatch batch(static_cast<int64_t>(threshold));
  // A fresh response around the previous work's buffers: its name strings are assigned over
  // (no allocation while they fit), its vectors keep their capacity.
  std::vector<std::string> names = std::move(work->response.names);
  std::vector<uint32_t> cache_ids = std::move(work->response.cache_ids);
  std::vector<int64_t> num_elements = std::move(work->response.num_elements);
  std::vector<int64_t> first_dims = std::move(work->response.first_dims);
  std::vector<int64_t> splits = std::move(work->response.splits);
  cache_ids.clear();
  num_elements.clear();
  first_dims.clear();
  splits.clear();
  work->entries.clear();
  work->from_controller = false;
  work->response = Response();
  Response& response = work->response;
  size_t count = 0;
  response.seq = 0;  // the fast path: no controller sequence number
  response.fast_round = decision.round;
  response.hierarchy_min_bytes = decision.hierarchy_min_bytes;
  for (; decided.next < decided.ids.size(); ++decided.next) {
    const uint32_t id = decided.ids[decided.next];
    const FastSpec& s = decided.specs[decided.next];
    if (!batch.Admits(KeyOf(s), s.fusion_bytes)) break;
    if (batch.empty()) {
      response.op = s.op;
      response.dtype = s.dtype;
      response.reduce_op = s.reduce_op;
      response.prescale = s.prescale;
      response.postscale = s.postscale;
      response.root = s.root;
      response.process_set = s.process_set;
      splits.assign(s.splits.begin(), s.splits.end());  // an alltoall's (never fused); else empty
      // The round's hierarchical rule is an allreduce's; the others apply the configured
      // KOLO_HIERARCHICAL, as they do when the controller decides them.
      if (s.op != OpType::kAllreduce) response.hierarchy_min_bytes.reset();
    }
    batch.Add(KeyOf(s), s.fusion_bytes);
    if (count < names.size()) {
      names[count] = s.name;
    } else {
      names.push_back(s.name);
    }
    ++count;
    cache_ids.push_back(id);
    num_elements.push_back(s.num_elements);
    first_dims.insert(first_dims.end(), s.first_dims.begin(), s.first_dims.end());
    work->entries.push_back(decided.entries[decided.next]);
  }
  names.resize(count);
  response.names = std::move(names);
  response.cache_ids = std::move(cache_ids);
  response.num_elements = std::move(num_elements);
  response.first_dims = std::move(first_dims);
  response.splits = std::move(splits);
  response.fast_group = FastGroup(decision.round, decided.batches++);
}

Status FastPath::CheckDeadlines(TimePoint now) const {
  const auto limit = DurationOf(options_.timeout_seconds);
  if (rounds_.waiting()) {
    const std::vector<int> missing = rounds_.missing();
    std::vector<int> gone;
    for (int r : missing) {
      if (lane_closed_[r]) gone.push_back(r);
    }
    const std::string round = "round " + std::to_string(rounds_.current_round());
    if (!gone.empty()) {
      return Unavailable("fast path: rank(s) " + RankList(gone) +
                         " closed the connection before answering " + round);
    }
    if (now - rounds_.waiting_since() >= limit) {
      return DeadlineExceeded("fast path: no answer to " + round + " from rank(s) " +
                              RankList(missing) + " within " +
                              SecondsText(options_.timeout_seconds) + " (KOLO_TIMEOUT_SECONDS)");
    }
  }
  if (blocked_ && now - blocked_since_ >= limit) {
    return DeadlineExceeded("waited " + SecondsText(options_.timeout_seconds) +
                            " (KOLO_TIMEOUT_SECONDS) for controller response " +
                            std::to_string(handed_seq_ + 1) + ", which another rank has received");
  }
  return Status::Ok();
}

bool FastPath::Settled() const {
  return !rounds_.waiting() && last_sent_.stopping && hits_.empty() && held_.empty();
}

bool FastPath::Done() const {
  return !rounds_.waiting() && decided_.empty() && handed_seq_ == received_seq_ &&
         received_seq_ <= decided_seq_;
}

bool FastPath::Quiet() const {
  return Done() && hits_.empty() && held_.empty() && !stopping_ && foreign_.empty() && !NeedRound();
}

void FastPath::DropEntries() {
  hits_.clear();
  held_.clear();
  decided_.clear();
  received_.clear();
  handed_seq_ = received_seq_;
}

}  // namespace kolo
