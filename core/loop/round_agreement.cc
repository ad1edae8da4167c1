#include "core/loop/round_agreement.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

namespace kolo {
namespace {

bool StrictlyAscending(const std::vector<uint32_t>& ids) {
  return std::adjacent_find(ids.begin(), ids.end(),
                            [](uint32_t a, uint32_t b) { return a >= b; }) == ids.end();
}

std::vector<uint32_t> Union(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// In place, both ascending: keeps in `a` what `b` has too (`keep`) or what it lacks (!keep).
// A decision is on a small op's critical path; this allocates nothing.
void Filter(std::vector<uint32_t>* a, const std::vector<uint32_t>& b, bool keep) {
  auto in_b = b.begin();
  size_t kept = 0;
  for (uint32_t id : *a) {
    in_b = std::lower_bound(in_b, b.end(), id);
    const bool found = in_b != b.end() && *in_b == id;
    if (found == keep) (*a)[kept++] = id;
  }
  a->resize(kept);
}

}  // namespace

RoundAgreement::RoundAgreement(int rank, int size)
    : rank_(rank), size_(size), departed_(size, false) {
  slots_[0].resize(size);
  slots_[1].resize(size);
}

bool RoundAgreement::must_answer() const {
  if (mine_sent_) return false;
  return std::any_of(slots_[0].begin(), slots_[0].end(),
                     [](const std::optional<RoundMessage>& m) { return m.has_value(); });
}

std::vector<int> RoundAgreement::missing() const {
  std::vector<int> out;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && !slots_[0][r].has_value() && !departed_[r]) out.push_back(r);
  }
  return out;
}

void RoundAgreement::Depart(int rank) {
  if (rank >= 0 && rank < size_ && rank != rank_) departed_[rank] = true;
}

Status RoundAgreement::Receive(int from, RoundMessage message) {
  auto who = [from] { return "rank " + std::to_string(from); };  // for an error only
  if (from < 0 || from >= size_ || from == rank_) {
    return Internal("fast path: a round message from " + who() + ", not a peer of rank " +
                    std::to_string(rank_));
  }
  // A peer completes round k, and so may start k + 1, only with this rank's message for k.
  const bool next_too_early = message.round == round_ + 1 && !mine_sent_;
  if ((message.round != round_ && message.round != round_ + 1) || next_too_early) {
    return Internal("fast path: " + who() + " sent a message for round " +
                    std::to_string(message.round) + " while rank " + std::to_string(rank_) +
                    " is in round " + std::to_string(round_));
  }
  if (!StrictlyAscending(message.ready) || !StrictlyAscending(message.diverted)) {
    return Internal("fast path: " + who() + " sent cache ids out of order in round " +
                    std::to_string(message.round));
  }
  std::optional<RoundMessage>& slot = slots_[message.round == round_ ? 0 : 1][from];
  if (slot.has_value()) {
    return Internal("fast path: " + who() + " sent two messages for round " +
                    std::to_string(message.round));
  }
  slot = std::move(message);
  return Status::Ok();
}

void RoundAgreement::RecordSent(RoundMessage* message, std::chrono::steady_clock::time_point now) {
  message->round = round_;
  slots_[0][rank_] = *message;
  mine_sent_ = true;
  sent_at_ = now;
}

std::optional<RoundDecision> RoundAgreement::TakeDecision() {
  if (!mine_sent_) return std::nullopt;
  for (int r = 0; r < size_; ++r) {
    if (slots_[0][r].has_value()) continue;
    if (!departed_[r]) return std::nullopt;
    RoundMessage gone;  // a departed rank: stopping, nothing ready, nothing to add
    gone.round = round_;
    gone.stopping = true;
    gone.fusion_threshold = UINT64_MAX;
    slots_[0][r] = gone;
  }
  RoundDecision decision;
  decision.round = round_;
  decision.fusion_threshold = UINT64_MAX;
  // Runnable: the ids every rank that has not joined reported (any rank's, when every rank
  // joined), minus those some rank diverted.
  const std::vector<uint32_t>* first_ready = nullptr;  // of a rank that has not joined
  for (const auto& slot : slots_[0]) {
    decision.run_through_seq = std::max(decision.run_through_seq, slot->received_seq);
    if (!slot->diverted.empty()) decision.diverted = Union(decision.diverted, slot->diverted);
    decision.stopping = decision.stopping || slot->stopping;
    decision.fusion_threshold = std::min(decision.fusion_threshold, slot->fusion_threshold);
    if (!slot->joined && first_ready == nullptr) first_ready = &slot->ready;
  }
  if (first_ready != nullptr) {
    decision.runnable = *first_ready;
    for (const auto& slot : slots_[0]) {
      if (!slot->joined) Filter(&decision.runnable, slot->ready, /*keep=*/true);
    }
  } else {
    for (const auto& slot : slots_[0]) decision.runnable = Union(decision.runnable, slot->ready);
  }
  Filter(&decision.runnable, decision.diverted, /*keep=*/false);
  slots_[0].swap(slots_[1]);
  slots_[1].assign(size_, std::nullopt);
  mine_sent_ = false;
  ++round_;
  return decision;
}

}  // namespace kolo
