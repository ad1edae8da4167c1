#include "core/loop/fast_path.h"

#include <algorithm>
#include <utility>

#include "core/hierarchy_rule.h"
#include "core/op_text.h"

namespace kolo {
namespace {

// What this rank's round messages carry as its fusion threshold.
uint64_t FusionThreshold(const Options& options, const Autotuner* autotuner) {
  // With KOLO_AUTOTUNE rank 0's tuner sets the threshold and every other rank sends "no
  // limit": the round's rule (the smallest sent) then gives every rank the tuned one.
  if (autotuner != nullptr) return static_cast<uint64_t>(autotuner->fusion_threshold_bytes());
  if (options.autotune) return UINT64_MAX;
  return static_cast<uint64_t>(std::max<int64_t>(options.fusion_threshold_bytes, 0));
}

// What they carry as its hierarchical rule (core/hierarchy_rule.h).
uint64_t HierarchyMinBytes(const Options& options, const Autotuner* autotuner) {
  // The same rule for the hierarchical choice, while rank 0's tuner tunes it (it does with
  // KOLO_HIERARCHICAL=auto on several hosts); a rank without KOLO_AUTOTUNE sends its own rule.
  if (autotuner != nullptr && autotuner->tunes_hierarchy()) {
    return autotuner->hierarchy_min_bytes();
  }
  if (autotuner == nullptr && options.autotune) return kHierarchyFlat;
  return ConfiguredHierarchyMinBytes(options.hierarchical);
}

// Adds to `message` the inputs of its ready allreduces (the job's, on CPU) that fit in
// `budget` bytes, in ascending id order (docs/FAST-PATH.md, "Eager"). Every message that
// reports them ready carries them again: a round that does not decide an op (a peer had not
// reported it yet) drops its inputs, and the round that does needs every member's.
void AttachEager(const WaitingOps& waiting, const OpCache& cache, uint64_t budget,
                 RoundMessage* message) {
  uint64_t used = 0;
  for (uint32_t id : message->ready) {
    if (NeedsEveryRank(id)) break;  // not the job's allreduces: they sort last
    const TensorEntry* entry = waiting.Find(id);
    const FastSpec* spec = cache.Own(id);
    if (entry == nullptr || spec == nullptr || spec->op != OpType::kAllreduce ||
        spec->process_set != 0 || !entry->input.device.is_cpu()) {
      continue;
    }
    const size_t bytes = entry->input.num_bytes();
    if (bytes == 0 || entry->input.data == nullptr || used + bytes > budget) continue;
    // The input itself, not a copy: the lane copies it into the wire's bytes, and this rank's
    // own share of the round's eager inputs is its entry's.
    message->eager.inputs.push_back(
        {id, static_cast<uint32_t>(bytes), static_cast<const uint8_t*>(entry->input.data)});
    used += bytes;
  }
}

// Stages the input of `message`'s ready op when it is the one op it reports, the job's
// allreduce, and carries no eager input (docs/FAST-PATH.md, "Staged inputs"): a round that
// decides it on every rank, each having staged it alike, then skips its copy in and a sync.
void AttachStaged(const WaitingOps& waiting, const OpCache& cache, const RoundStager& stager,
                  RoundMessage* message) {
  if (message->ready.size() != 1 || message->joined || !message->eager.empty()) return;
  const uint32_t id = message->ready.front();
  const TensorEntry* entry = waiting.Find(id);
  const FastSpec* spec = cache.Own(id);
  if (entry == nullptr || spec == nullptr || spec->op != OpType::kAllreduce ||
      spec->process_set != 0 || spec->group != 0 || !entry->input.device.is_cpu()) {
    return;
  }
  if (std::optional<uint64_t> exchange = stager(spec->signature(), *entry)) {
    message->staged = RoundStaged{id, *exchange};
  }
}

}  // namespace

FastPath::FastPath(const Options& options, const OpCache* cache, TraceSink* negotiation_sink,
                   const Autotuner* autotuner, bool shared_memory_rounds, RoundStager stager)
    : options_(options),
      cache_(cache),
      autotuner_(autotuner),
      // Eager inputs only where every rank receives every rank's message (all-to-all).
      inputs_{options.size < 2 || RoundPatternFor(options.size) != RoundPattern::kAllToAll ? 0
              : options.eager_bytes >= 0 ? static_cast<uint64_t>(options.eager_bytes)
                                         : (shared_memory_rounds ? 0 : kEagerAutoBytes),
              std::move(stager)},
      rounds_(options.rank, options.size),
      round_trace_(negotiation_sink, options.size),
      waiting_(cache, DurationOf(DivertAfterSeconds(options))),
      closed_lanes_{std::vector<bool>(options.size, false), 0},
      peer_stopping_(options.size, false) {}

double FastPath::DivertAfterSeconds(const Options& options) {
  return options.stall_check_seconds > 0 ? std::min(1.0, options.stall_check_seconds / 2) : 1.0;
}

bool FastPath::Offer(TensorEntry* entry, uint32_t cache_id, TimePoint now, bool behind_others) {
  const TensorMeta& meta = entry->meta;
  if (meta.op == OpType::kJoin) waiting_.Join(meta.process_set);
  if (waiting_.Hold(entry)) return true;  // a join or a removal behind this rank's waiting ops
  const bool may_wait = !(behind_others && meta.op == OpType::kBarrier);
  if (!stopping_ && !closed_ && may_wait && waiting_.Wait(entry, cache_id, now)) {
    round_trace_.Ready(options_.rank, cache_id, meta.name, meta.op, 0, now);
    return true;
  }
  // Its metadata changed: the peers' cached copies must meet it at the controller (which names
  // the mismatch) instead of waiting for a round.
  if (cache_id == 0 || !may_wait) waiting_.DivertChanged(meta.name);
  return false;
}

bool FastPath::OfferGroup(const std::vector<TensorEntry*>& entries,
                          const std::vector<uint32_t>& cache_ids, TimePoint now) {
  if (stopping_ || closed_) return false;
  if (!waiting_.WaitGroup(entries, cache_ids, now)) return false;
  for (size_t i = 0; i < entries.size(); ++i) {
    round_trace_.Ready(options_.rank, cache_ids[i], entries[i]->meta.name, entries[i]->meta.op, 0,
                       now);
  }
  return true;
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
      const FastSpec* spec = cache_->SpecOf(id);
      if (spec != nullptr && cache_->MemberOf(spec->process_set, from)) {
        round_trace_.Ready(from, id, spec->name, spec->op, message.round, now);
      }
    }
  }
  return rounds_.Receive(from, std::move(message));
}

void FastPath::PeerClosed(int rank) {
  if (rank < 0 || rank >= options_.size) return;
  if (!closed_lanes_.by_rank[rank]) ++closed_lanes_.count;
  closed_lanes_.by_rank[rank] = true;
  // Its messages came before its end of stream: a peer that said `stopping` and then closed
  // left after shutdown() (e.g. it stopped waiting for the others); rounds go on without it.
  if (peer_stopping_[rank]) rounds_.Depart(rank);
}

Status FastPath::Advance(TimePoint now, Outbox* out) {
  // Only between rounds: an id in this rank's open round message may still be decided runnable.
  // What must not wait for a round any longer goes to the controller: everything once this rank
  // or a peer is stopping, else what waited longer than the patience for the other ranks (the
  // controller's stall inspector then sees it and names who is late).
  if (!rounds_.waiting()) waiting_.DivertOverdue(now, stopping_ || closed_, &out->to_controller);
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
  if (order_.received_seq() > order_.decided_seq() || waiting_.HasNews()) return true;
  return waiting_.joined() != last_sent_.joined || stopping_ != last_sent_.stopping;
}

RoundMessage FastPath::MakeRound(TimePoint now) {
  RoundMessage message;
  message.received_seq = order_.received_seq();
  message.stopping = stopping_;
  message.fusion_threshold = FusionThreshold(options_, autotuner_);
  message.hierarchy_min_bytes = HierarchyMinBytes(options_, autotuner_);
  waiting_.Report(&message);
  if (inputs_.eager_bytes > 0) AttachEager(waiting_, *cache_, inputs_.eager_bytes, &message);
  if (inputs_.stager) AttachStaged(waiting_, *cache_, inputs_.stager, &message);
  rounds_.RecordSent(&message, now);
  last_sent_ = message;
  return message;
}

Status FastPath::ApplyDecision(RoundDecision decision, TimePoint now, Outbox* out) {
  order_.DecidedThrough(decision.run_through_seq);
  if (decision.stopping) closed_ = true;
  for (const std::vector<uint32_t>* ids : {&decision.runnable, &decision.diverted}) {
    for (uint32_t id : *ids) {
      const FastSpec* spec = cache_->SpecOf(id);
      if (spec != nullptr) round_trace_.Closed(id, spec->name, ids == &decision.runnable, now);
    }
  }
  round_trace_.Decided(decision.round, now);  // readiness a peer ahead sent for the next round
  for (uint32_t id : decision.diverted) waiting_.Divert(id, &out->to_controller);
  WorkOrder::Decided decided = order_.TakeSpare();  // the buffers of the last one run
  decided.decision = std::move(decision);
  const RoundDecision& taken = decided.decision;
  size_t specs = 0;  // assigned over the spare's so far
  // Built for an error only: this runs once per round, a small op's critical path.
  auto round = [&] { return "fast path: round " + std::to_string(taken.round); };
  for (uint32_t id : taken.runnable) {
    const bool mine = std::binary_search(last_sent_.ready.begin(), last_sent_.ready.end(), id);
    TensorEntry* hit = waiting_.Find(id);
    const FastSpec* spec = cache_->Own(id);
    // Another set's: its members run it. (Or it was when this rank reported it, and a response
    // since retired the id: then its members cannot all have reported it, but nothing of it
    // is this rank's either way.)
    if (cache_->foreign().count(id) != 0 || (mine && hit == nullptr && spec == nullptr)) {
      continue;
    }
    if (mine && (hit == nullptr || spec == nullptr)) {
      return Internal(round() + " decided on cache id " + std::to_string(id) +
                      ", which this rank reported ready but no longer holds");
    }
    if (!mine && (!last_sent_.joined || NeedsEveryRank(id) || spec == nullptr)) {
      return Internal(round() + " decided on cache id " + std::to_string(id) +
                      ", which this rank neither reported ready nor can stand in for");
    }
    decided.ids.push_back(id);
    decided.entries.push_back(mine ? hit : nullptr);  // null: joined, zeros
    if (specs < decided.specs.size()) {
      decided.specs[specs] = *spec;  // its strings' buffers reused
    } else {
      decided.specs.push_back(*spec);
    }
    ++specs;
    if (mine) waiting_.Decided(id);
  }
  decided.specs.erase(decided.specs.begin() + static_cast<std::ptrdiff_t>(specs),
                      decided.specs.end());
  order_.Add(std::move(decided));
  return Status::Ok();
}

bool FastPath::NextWork(TimePoint now, Work* work) {
  if (!order_.Next(now, work)) return false;
  if (work->from_controller) waiting_.Handed(work->response);
  return true;
}

Status FastPath::CheckDeadlines(TimePoint now) const {
  // Checked every pass while a round is open: nothing is built unless a peer closed its lane
  // or the round is overdue.
  const bool overdue =
      rounds_.waiting() && now - rounds_.waiting_since() >= DurationOf(options_.timeout_seconds);
  if (rounds_.waiting() && (overdue || closed_lanes_.count != 0)) {
    const std::vector<int> missing = rounds_.missing();
    std::vector<int> gone;
    for (int r : missing) {
      if (closed_lanes_.by_rank[r]) gone.push_back(r);
    }
    const std::string round = "round " + std::to_string(rounds_.current_round());
    if (!gone.empty()) {
      return Unavailable("fast path: rank(s) " + RankList(gone) +
                         " closed the connection before answering " + round);
    }
    if (overdue) {
      return DeadlineExceeded("fast path: no answer to " + round + " from rank(s) " +
                              RankList(missing) + " within " +
                              SecondsText(options_.timeout_seconds) + " (KOLO_TIMEOUT_SECONDS)");
    }
  }
  return order_.CheckBlocked(now, options_.timeout_seconds);
}

bool FastPath::Settled() const {
  return !rounds_.waiting() && last_sent_.stopping && waiting_.empty();
}

bool FastPath::Done() const {
  return !rounds_.waiting() && order_.Done();
}

bool FastPath::Quiet() const {
  return Done() && waiting_.empty() && !stopping_ && cache_->foreign().empty() && !NeedRound();
}

void FastPath::DropEntries() {
  waiting_.Drop();
  order_.Drop();
}

}  // namespace kolo
