// RoundAgreement: the bookkeeping of the fast path's rounds (docs/FAST-PATH.md), without I/O.
// Every rank contributes exactly one RoundMessage per round, either to start the round (it has
// something new: cached tensors ready, controller responses received, a flag changed) or to
// answer a peer whose message of the round reached it. How the messages travel is the job's
// RoundPattern (core/round_lane.h): all-to-all, a rank sends its own to every peer and the round
// is complete once it holds all `size`; dissemination, it sends at each step s what it has
// combined so far to rank + 2^s and combines what rank - 2^s sent it, and the round is complete
// once every step's message is combined (ceil(log2 size) sequential hops). The combine
// (CombineRound) is associative, commutative and idempotent, so both patterns give every rank
// the same RoundDecision as combining all `size` messages at once:
//   - run_through_seq: the highest controller sequence number any rank has received; every rank
//     runs the controller's responses up to it first (waiting to receive them if needed),
//   - runnable: the allreduce cache ids every rank that has not joined reported ready, and the
//     ids of the other ops (kEveryRankCacheIdBit, core/messages.h) every rank reported ready,
//     minus any id some rank diverted to the controller, run next in ascending order,
//   - diverted: those ids; every rank sends them to the controller from now on,
//   - stopping: some rank called shutdown(); every rank sends every op to the controller.
//   - fusion_threshold, hierarchy_min_bytes: the smallest any rank sent; the runnable ids fuse
//     under the one and run hierarchically from the other.
// Rounds are numbered 1, 2, ...; a rank starts round k + 1 only after round k is complete at
// it, so a peer's message is always for the current round or the next one (a round complete at
// a peer holds, combined, this rank's message, so this rank has sent it). Except under
// dissemination once a rank departed (Depart): its stand-in replaces steps that relayed other
// ranks' messages, so a peer can complete rounds without this rank's, even before this rank
// sees the departure. Its lead is still bounded: completing round r needs each live sender to
// have completed r - 1, so a peer m hops downstream of this rank is at most m rounds ahead,
// and m < size while the live ranks stay connected.
//
// Threading: not thread-safe; owned by the background thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "core/round_lane.h"
#include "kolo/status.h"

namespace kolo {

struct RoundDecision {
  uint64_t round = 0;
  uint64_t run_through_seq = 0;
  std::vector<uint32_t> runnable;  // ascending
  std::vector<uint32_t> diverted;  // ascending
  bool stopping = false;
  uint64_t fusion_threshold = 0;  // the smallest any rank sent: runnable ids fuse under it
  // The smallest any rank sent: the runnable allreduces of at least this many bytes run
  // hierarchically (core/hierarchy_rule.h).
  uint64_t hierarchy_min_bytes = kHierarchyFlat;
  // All-to-all: each rank's eager inputs (RoundMessage::eager), by rank; empty when no message
  // carried any. Identical on every rank: an allreduce whose inputs every member sent runs
  // from them (docs/FAST-PATH.md, "Eager").
  std::vector<RoundEager> eager;
  // The op every rank's message staged alike (RoundMessage::staged), else none: run as the
  // plane's exchange it names, it skips its copy in and a sync (docs/FAST-PATH.md, "Staged
  // inputs").
  RoundStaged staged;
};

// Combines `other` into `into`: the highest received_seq, stopping if either, the smaller
// fusion_threshold and hierarchy_min_bytes, the union of diverted, joined if both, and as ready:
// of the allreduce ids, those both have if neither joined, those of the one that did not join if
// one did, both's if both did; of the ids with kEveryRankCacheIdBit, those both have; staged
// if both staged the same, else none. round, step and eager are left alone.
void CombineRound(RoundMessage* into, const RoundMessage& other);

// A round message to send: `to` one peer, or -1 every peer (all-to-all).
struct RoundSend {
  int to = -1;
  RoundMessage message;
};

class RoundAgreement {
 public:
  // The pattern is RoundPatternFor(size), as on every rank.
  RoundAgreement(int rank, int size);
  RoundAgreement(int rank, int size, RoundPattern pattern);

  RoundPattern pattern() const { return pattern_; }

  // The round this rank's next message belongs to.
  uint64_t current_round() const { return round_; }
  // This rank sent its message for the current round, which is not complete yet.
  bool waiting() const { return mine_sent_; }
  // A peer sent its message for the current round and this rank has not: it answers at once.
  bool must_answer() const;
  // When this rank sent its message for the current round (valid while waiting()).
  std::chrono::steady_clock::time_point waiting_since() const { return sent_at_; }
  // Ranks whose message for the current round has not arrived (while waiting()).
  std::vector<int> missing() const;

  // A peer's message. Protocol errors (a sender out of range or this rank itself, a second
  // message for one round, a round other than the current or the next, the next before this
  // rank sent its message for the current one, unsorted ids; dissemination: a step out of
  // range or a sender that is not that step's; all-to-all: a step or a notice) fail, naming
  // the sender, and change nothing. A notice only tells of its round. Under dissemination any
  // of the next size - 1 rounds is accepted (a departed rank's doing, see above), also before
  // this rank sent its message for the current one, which it then owes (must_answer()).
  Status Receive(int from, RoundMessage message);

  // This rank's own message for the current round: sets message->round (and step 0) and records
  // it. Call once per round, when !waiting(). Then TakeSends says what to send.
  void RecordSent(RoundMessage* message, std::chrono::steady_clock::time_point now);

  // Appends the messages due now (after RecordSent and Receive): all-to-all, this rank's own
  // message to every peer once; dissemination, each step's combined message once the steps
  // before it are combined, and the notices due (core/round_lane.h), each before its step's
  // message on that connection.
  void TakeSends(std::vector<RoundSend>* out);

  // If all messages of the current round are in: its decision, and the next round begins.
  std::optional<RoundDecision> TakeDecision();

  // `rank` said `stopping` and then closed its connection (it left after shutdown()): from
  // now on rounds count it as stopping with nothing ready, instead of waiting for it. Every
  // rank has then stopped using the fast path, so what it would have sent cannot matter.
  void Depart(int rank);

 private:
  // The message of a departed rank: stopping, nothing ready, nothing to add.
  RoundMessage Gone() const;
  // After a message of a later round arrived (dissemination): if this rank has not sent its
  // message for the current round, it owes it now (must_answer()).
  void OweCurrentIf(bool heard_of_later_round);
  // Dissemination: queues sends and combines as far as the steps received allow.
  void Disseminate();
  // All-to-all, the round complete: moves every message's eager inputs to eager_ (`first`
  // holds rank 0's message).
  void TakeEager(RoundMessage* first);
  // The rank whose message fills slot `i`: all-to-all, rank i; dissemination, step i's sender.
  int SenderOf(size_t slot) const;

  // Constant after construction.
  const int rank_;
  const int size_;
  const RoundPattern pattern_;
  const int steps_;  // dissemination: ceil(log2 size_)

  uint64_t round_ = 1;
  bool mine_sent_ = false;
  std::chrono::steady_clock::time_point sent_at_;
  // What arrived for one round: messages all-to-all by rank (this rank's own included),
  // dissemination by step; and the dissemination notices (core/round_lane.h): notices are due
  // for the steps below notice_below (a starter: all), from step 1 on.
  struct Inbox {
    std::vector<std::optional<RoundMessage>> messages;
    int notice_below = 0;
  };
  // Inbox of the current round ([0]) and of the rounds after it that peers already sent ([d]:
  // round round_ + d); never empty.
  Inbox& InboxOf(uint64_t round);
  std::deque<Inbox> inboxes_;
  std::optional<Inbox> spare_;      // the last round's, emptied, for InboxOf to reuse
  std::vector<bool> departed_;      // by rank
  int notices_done_ = 1;            // current round: the steps below this are noticed or sent
  std::vector<RoundSend> pending_;  // for TakeSends
  std::vector<RoundEager> eager_;   // the complete round's, by rank (TakeEager)
  // This rank's combination so far (dissemination), the steps sent and the steps combined.
  RoundMessage combined_;
  int steps_sent_ = 0;
  int steps_combined_ = 0;
};

}  // namespace kolo
