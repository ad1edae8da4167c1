#include "core/loop/round_agreement.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "core/messages.h"

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
  into->hierarchy_min_bytes = std::min(into->hierarchy_min_bytes, other.hierarchy_min_bytes);
  if (!(into->staged == other.staged)) into->staged = RoundStaged();
  if (!other.diverted.empty()) into->diverted = Union(into->diverted, other.diverted);
  if (!into->joined && !other.joined) {
    Filter(&into->ready, other.ready, /*keep=*/true);  // the common case: allocates nothing
  } else {
    // A joined rank is ready for every allreduce the other is, and for no other op: the ids
    // that need every rank (they sort last) are the ones both have, joined or not.
    auto every_rank = [](const std::vector<uint32_t>& ids) {
      return std::lower_bound(ids.begin(), ids.end(), kEveryRankCacheIdBit);
    };
    const std::vector<uint32_t>& mine = into->ready;
    const auto into_split = every_rank(mine);
    const auto other_split = every_rank(other.ready);
    std::vector<uint32_t> ready;
    if (into->joined && other.joined) {
      std::set_union(mine.begin(), into_split, other.ready.begin(), other_split,
                     std::back_inserter(ready));
    } else if (into->joined) {
      ready.assign(other.ready.begin(), other_split);
    } else {
      ready.assign(mine.begin(), into_split);
    }
    std::set_intersection(into_split, mine.end(), other_split, other.ready.end(),
                          std::back_inserter(ready));
    into->ready = std::move(ready);
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
  inboxes_.emplace_back().messages.resize(pattern_ == RoundPattern::kAllToAll ? size : steps_);
}

RoundAgreement::Inbox& RoundAgreement::InboxOf(uint64_t round) {
  const size_t ahead = static_cast<size_t>(round - round_);
  while (inboxes_.size() <= ahead) {
    if (spare_.has_value()) {
      inboxes_.push_back(std::move(*spare_));
      spare_.reset();
    } else {
      inboxes_.emplace_back().messages.resize(inboxes_.front().messages.size());
    }
  }
  return inboxes_[ahead];
}

int RoundAgreement::SenderOf(size_t slot) const {
  if (pattern_ == RoundPattern::kAllToAll) return static_cast<int>(slot);
  return RoundReceivePeer(rank_, size_, static_cast<int>(slot));
}

bool RoundAgreement::must_answer() const {
  if (mine_sent_) return false;
  const Inbox& now = inboxes_.front();
  return now.notice_below > 0 ||
         std::any_of(now.messages.begin(), now.messages.end(),
                     [](const std::optional<RoundMessage>& m) { return m.has_value(); });
}

std::vector<int> RoundAgreement::missing() const {
  std::vector<int> out;
  const size_t first = pattern_ == RoundPattern::kAllToAll ? 0 : steps_combined_;
  const std::vector<std::optional<RoundMessage>>& messages = inboxes_.front().messages;
  for (size_t i = first; i < messages.size(); ++i) {
    const int r = SenderOf(i);
    if (r != rank_ && !messages[i].has_value() && !departed_[r]) out.push_back(r);
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
  // A peer completes round k, and so may start k + 1, only with this rank's message for k
  // (all-to-all: it holds it). Under dissemination a departed rank's stand-in drops what it
  // would have relayed, so a peer downstream may complete rounds without this rank's message,
  // up to size - 1 rounds ahead (the header), before this rank even sees the departure (its
  // lane to the departed rank may close later, or never: it need not be one of its peers). A
  // message of a later round then also tells of the current one.
  const bool relayed = pattern_ == RoundPattern::kDissemination;
  const uint64_t rounds_open = relayed ? static_cast<uint64_t>(size_) : 2;
  const bool ahead = message.round > round_;
  const bool too_early = ahead && !mine_sent_ && !relayed;
  if (message.round < round_ || message.round - round_ >= rounds_open || too_early) {
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
      int& below = InboxOf(message.round).notice_below;
      below = std::max(below, std::max(static_cast<int>(message.step), 1));
      OweCurrentIf(ahead);
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
  std::optional<RoundMessage>& slot = InboxOf(message.round).messages[index];
  if (slot.has_value()) {
    return Internal("fast path: " + who() + " sent two messages for round " +
                    std::to_string(message.round));
  }
  slot = std::move(message);
  OweCurrentIf(ahead);
  return Status::Ok();
}

void RoundAgreement::OweCurrentIf(bool heard_of_later_round) {
  // Only under dissemination (else Receive refused it): a peer is in a later round, so the
  // current one has begun, and this rank's message is missing from it.
  if (heard_of_later_round && !mine_sent_) {
    inboxes_.front().notice_below = std::max(inboxes_.front().notice_below, 1);
  }
}

void RoundAgreement::RecordSent(RoundMessage* message, std::chrono::steady_clock::time_point now) {
  message->round = round_;
  message->step = 0;
  message->notice = false;
  const bool answering = must_answer();
  mine_sent_ = true;
  sent_at_ = now;
  if (pattern_ == RoundPattern::kAllToAll) {
    inboxes_.front().messages[rank_] = *message;
    pending_.push_back(RoundSend{-1, *message});
    return;
  }
  // Nothing of this round came in: this rank starts it, and tells every step's peer at once.
  if (!answering) inboxes_.front().notice_below = steps_;
  combined_ = *message;
  steps_sent_ = 0;
  steps_combined_ = 0;
  notices_done_ = 1;
  Disseminate();
}

void RoundAgreement::Disseminate() {
  if (!mine_sent_ || pattern_ != RoundPattern::kDissemination) return;
  // Notices first: a peer whose step message has gone out heard of the round from it.
  for (; notices_done_ < inboxes_.front().notice_below; ++notices_done_) {
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
    std::optional<RoundMessage>& slot = inboxes_.front().messages[steps_combined_];
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

void RoundAgreement::TakeEager(RoundMessage* first) {
  // Rank 0's message was moved into `first`; the inbox is emptied right after.
  std::vector<std::optional<RoundMessage>>& messages = inboxes_.front().messages;
  bool any = !first->eager.empty();
  for (int r = 1; r < size_ && !any; ++r) any = !messages[r]->eager.empty();
  if (!any) return;  // the common case without eager inputs: nothing to move
  eager_.resize(static_cast<size_t>(size_));
  eager_[0] = std::move(first->eager);
  first->eager.clear();
  for (int r = 1; r < size_; ++r) eager_[r] = std::move(messages[r]->eager);
}

RoundMessage RoundAgreement::Gone() const {
  RoundMessage gone;
  gone.round = round_;
  gone.stopping = true;
  gone.fusion_threshold = UINT64_MAX;
  gone.hierarchy_min_bytes = kHierarchyFlat;
  return gone;
}

std::optional<RoundDecision> RoundAgreement::TakeDecision() {
  if (!mine_sent_) return std::nullopt;
  if (pattern_ == RoundPattern::kAllToAll) {
    std::vector<std::optional<RoundMessage>>& messages = inboxes_.front().messages;
    for (int r = 0; r < size_; ++r) {
      if (messages[r].has_value()) continue;
      if (!departed_[r]) return std::nullopt;
      messages[r] = Gone();
    }
    combined_ = std::move(*messages[0]);
    for (int r = 1; r < size_; ++r) CombineRound(&combined_, *messages[r]);
    TakeEager(&combined_);
  } else {
    Disseminate();
    if (steps_combined_ < steps_) return std::nullopt;
  }
  RoundDecision decision;
  decision.round = round_;
  decision.run_through_seq = combined_.received_seq;
  decision.stopping = combined_.stopping;
  decision.fusion_threshold = combined_.fusion_threshold;
  decision.hierarchy_min_bytes = combined_.hierarchy_min_bytes;
  decision.diverted = std::move(combined_.diverted);
  decision.runnable = std::move(combined_.ready);
  decision.eager = std::move(eager_);
  decision.staged = combined_.staged;
  eager_.clear();
  Filter(&decision.runnable, decision.diverted, /*keep=*/false);
  // The next round's inbox becomes the current one (an empty one if no peer sent for it yet);
  // this round's is emptied and kept for reuse: a round is on a small op's critical path.
  Inbox done = std::move(inboxes_.front());
  inboxes_.pop_front();
  done.messages.assign(done.messages.size(), std::nullopt);
  done.notice_below = 0;
  spare_ = std::move(done);
  mine_sent_ = false;
  ++round_;
  InboxOf(round_);
  return decision;
}

}  // namespace kolo
