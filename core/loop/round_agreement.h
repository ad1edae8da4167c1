// RoundAgreement: the bookkeeping of the fast path's rounds (docs/FAST-PATH.md), without I/O.
// Every rank sends exactly one RoundMessage per round to every peer, either to start the round
// (it has something new: cached tensors ready, controller responses received, a flag changed)
// or to answer a peer that started it. A round is complete at a rank once it holds all `size`
// messages; every rank then derives the same RoundDecision from the same messages:
//   - run_through_seq: the highest controller sequence number any rank has received; every rank
//     runs the controller's responses up to it first (waiting to receive them if needed),
//   - runnable: the cache ids every rank that has not joined reported ready, minus any id some
//     rank diverted to the controller, run next in ascending order,
//   - diverted: those ids; every rank sends them to the controller from now on,
//   - stopping: some rank called shutdown(); every rank sends every op to the controller.
// Rounds are numbered 1, 2, ...; a rank starts round k + 1 only after round k is complete at
// it, so a peer's message is always for the current round or the next one.
//
// Threading: not thread-safe; owned by the background thread.
#pragma once

#include <chrono>
#include <cstdint>
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
};

class RoundAgreement {
 public:
  RoundAgreement(int rank, int size);

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
  // rank sent its message for the current one, unsorted ids) fail,
  // naming the sender, and change nothing.
  Status Receive(int from, RoundMessage message);

  // This rank's own message for the current round: sets message->round and records it.
  // Call once per round, when !waiting().
  void RecordSent(RoundMessage* message, std::chrono::steady_clock::time_point now);

  // If all messages of the current round are in: its decision, and the next round begins.
  std::optional<RoundDecision> TakeDecision();

  // `rank` said `stopping` and then closed its connection (it left after shutdown()): from
  // now on rounds count it as stopping with nothing ready, instead of waiting for it. Every
  // rank has then stopped using the fast path, so what it would have sent cannot matter.
  void Depart(int rank);

 private:
  // Constant after construction.
  const int rank_;
  const int size_;

  uint64_t round_ = 1;
  bool mine_sent_ = false;
  std::chrono::steady_clock::time_point sent_at_;
  // Messages of the current round [0] and the next one [1], by rank.
  std::vector<std::optional<RoundMessage>> slots_[2];
  std::vector<bool> departed_;  // by rank
};

}  // namespace kolo
