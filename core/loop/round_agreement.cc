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

void CombineRound(RoundMessage* into, const RoundMessage& other) {
  into->received_seq = std::max(into->received_seq, other.received_seq);
  into->stopping = into->stopping || other.stopping;
  into->fusion_threshold = std::min(into->fusion_threshold, other.fusion_threshold);
  if (!other.diverted.empty()) into->diverted = Union(into->diverted, other.diverted);
  if (into->joined && other.joined) {
    if (!other.ready.empty()) into->ready = Union(into->ready, other.ready);
  } else if (into->joined) {
    into->ready = other.ready;  // a joined rank is ready for everything the other is
  } else if (!other.joined) {
    Filter(&into->ready, other.ready, /*keep=*/true);
  }
  into->joined = into->joined && other.joined;
}

RoundAgreement::RoundAgreement(int rank, int size)
    : RoundAgreement(rank, size, RoundPatternFor(size)) {}

RoundAgreement::RoundAgreement(int rank, int size, RoundPattern pattern)
    : rank_(rank),
      size_(size),
      pattern_(pattern),
      steps_(RoundSteps(size)),
      departed_(size, false) {
  const size_t slots = pattern_ == RoundPattern::kAllToAll ? size : steps_;
  slots_[0].resize(slots);
  slots_[1].resize(slots);
}

int RoundAgreement::SenderOf(size_t slot) const {
  if (pattern_ == RoundPattern::kAllToAll) return static_cast<int>(slot);
  return RoundReceivePeer(rank_, size_, static_cast<int>(slot));
}

bool RoundAgreement::must_answer() const {
  if (mine_sent_) return false;
  return notice_below_[0] > 0 ||
         std::any_of(slots_[0].begin(), slots_[0].end(),
                     [](const std::optional<RoundMessage>& m) { return m.has_value(); });
}

std::vector<int> RoundAgreement::missing() const {
  std::vector<int> out;
  const size_t first = pattern_ == RoundPattern::kAllToAll ? 0 : steps_combined_;
  for (size_t i = first; i < slots_[0].size(); ++i) {
    const int r = SenderOf(i);
    if (r != rank_ && !slots_[0][i].has_value() && !departed_[r]) out.push_back(r);
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
  // A peer completes round k, and so may start k + 1, only with this rank's message for k;
  // except under dissemination once a rank departed: its stand-in replaced a step that would
  // have carried this rank's message. The message of k + 1 then also tells of k.
  const bool departures = pattern_ == RoundPattern::kDissemination &&
                          std::find(departed_.begin(), departed_.end(), true) != departed_.end();
  const bool next_too_early = message.round == round_ + 1 && !mine_sent_ && !departures;
  if (message.round == round_ + 1 && !mine_sent_ && departures) {
    notice_below_[0] = std::max(notice_below_[0], 1);
  }
  if ((message.round != round_ && message.round != round_ + 1) || next_too_early) {
    return Internal("fast path: " + who() + " sent a message for round " +
                    std::to_string(message.round) + " while rank " + std::to_string(rank_) +
                    " is in round " + std::to_string(round_));
  }
  size_t index = static_cast<size_t>(from);
  if (pattern_ == RoundPattern::kDissemination) {
    if (message.step >= static_cast<uint32_t>(steps_) ||
        RoundReceivePeer(rank_, size_, static_cast<int>(message.step)) != from) {
      return Internal("fast path: " + who() + " sent a message for step " +
                      std::to_string(message.step) + " of round " + std::to_string(message.round) +
                      ", which rank " + std::to_string(rank_) + " does not take from it");
    }
    index = message.step;
    if (message.notice) {
      // Only news of the round: the steps below its step are this rank's to notice.
      int& below = notice_below_[message.round == round_ ? 0 : 1];
      below = std::max(below, std::max(static_cast<int>(message.step), 1));
      return Status::Ok();
    }
  } else if (message.notice) {
    return Internal("fast path: " + who() + " sent a notice of round " +
                    std::to_string(message.round) + " to an all-to-all round");
  } else if (message.step != 0) {
    return Internal("fast path: " + who() + " sent step " + std::to_string(message.step) +
                    " of round " + std::to_string(message.round) + " to an all-to-all round");
  }
  if (!StrictlyAscending(message.ready) || !StrictlyAscending(message.diverted)) {
    return Internal("fast path: " + who() + " sent cache ids out of order in round " +
                    std::to_string(message.round));
  }
  std::optional<RoundMessage>& slot = slots_[message.round == round_ ? 0 : 1][index];
  if (slot.has_value()) {
    return Internal("fast path: " + who() + " sent two messages for round " +
                    std::to_string(message.round));
  }
  slot = std::move(message);
  return Status::Ok();
}

void RoundAgreement::RecordSent(RoundMessage* message, std::chrono::steady_clock::time_point now) {
  message->round = round_;
  message->step = 0;
  message->notice = false;
  const bool answering = must_answer();
  mine_sent_ = true;
  sent_at_ = now;
  if (pattern_ == RoundPattern::kAllToAll) {
    slots_[0][rank_] = *message;
    pending_.push_back(RoundSend{-1, *message});
    return;
  }
  // Nothing of this round came in: this rank starts it, and tells every step's peer at once.
  if (!answering) notice_below_[0] = steps_;
  combined_ = *message;
  steps_sent_ = 0;
  steps_combined_ = 0;
  notices_done_ = 1;
  Disseminate();
}

void RoundAgreement::Disseminate() {
  if (!mine_sent_ || pattern_ != RoundPattern::kDissemination) return;
  // Notices first: a peer whose step message has gone out heard of the round from it.
  for (; notices_done_ < notice_below_[0]; ++notices_done_) {
    if (notices_done_ < steps_sent_) continue;
    RoundSend& send = pending_.emplace_back();
    send.to = RoundSendPeer(rank_, size_, notices_done_);
    send.message.round = round_;
    send.message.step = static_cast<uint32_t>(notices_done_);
    send.message.notice = true;
  }
  for (;;) {
    if (steps_sent_ == steps_combined_ && steps_sent_ < steps_) {
      RoundSend& send = pending_.emplace_back();
      send.to = RoundSendPeer(rank_, size_, steps_sent_);
      send.message = combined_;
      send.message.round = round_;
      send.message.step = static_cast<uint32_t>(steps_sent_);
      ++steps_sent_;
      continue;
    }
    if (steps_combined_ == steps_sent_ || steps_combined_ == steps_) return;
    std::optional<RoundMessage>& slot = slots_[0][steps_combined_];
    if (!slot.has_value()) {
      if (!departed_[SenderOf(steps_combined_)]) return;
      slot = Gone();
    }
    CombineRound(&combined_, *slot);
    ++steps_combined_;
  }
}

void RoundAgreement::TakeSends(std::vector<RoundSend>* out) {
  Disseminate();
  for (RoundSend& send : pending_) out->push_back(std::move(send));
  pending_.clear();
}

RoundMessage RoundAgreement::Gone() const {
  RoundMessage gone;
  gone.round = round_;
  gone.stopping = true;
  gone.fusion_threshold = UINT64_MAX;
  return gone;
}

std::optional<RoundDecision> RoundAgreement::TakeDecision() {
  if (!mine_sent_) return std::nullopt;
  if (pattern_ == RoundPattern::kAllToAll) {
    for (int r = 0; r < size_; ++r) {
      if (slots_[0][r].has_value()) continue;
      if (!departed_[r]) return std::nullopt;
      slots_[0][r] = Gone();
    }
    combined_ = std::move(*slots_[0][0]);
    for (int r = 1; r < size_; ++r) CombineRound(&combined_, *slots_[0][r]);
  } else {
    Disseminate();
    if (steps_combined_ < steps_) return std::nullopt;
  }
  RoundDecision decision;
  decision.round = round_;
  decision.run_through_seq = combined_.received_seq;
  decision.stopping = combined_.stopping;
  decision.fusion_threshold = combined_.fusion_threshold;
  decision.diverted = std::move(combined_.diverted);
  decision.runnable = std::move(combined_.ready);
  Filter(&decision.runnable, decision.diverted, /*keep=*/false);
  slots_[0].swap(slots_[1]);
  slots_[1].assign(slots_[0].size(), std::nullopt);
  notice_below_[0] = notice_below_[1];
  notice_below_[1] = 0;
  mine_sent_ = false;
  ++round_;
  return decision;
}

}  // namespace kolo
