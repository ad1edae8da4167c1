// RoundLane: the connections over which ranks agree, without the controller, on which cached
// tensors run next (the fast path, docs/FAST-PATH.md). Small messages, sent as the round's
// pattern says (RoundPatternFor): up to kAllToAllMaxRanks ranks, one message per rank per round
// to every peer; beyond, one message per rank per step of a dissemination pattern, to the one
// peer that step names. transport/ implements it over a second set of authenticated TCP
// connections of the data mesh (transport/tcp/tcp_round_lane.h) and, when every rank shares
// one host, through the shared-memory segment with those connections as doorbells
// (transport/shm/shm_round_lane.h).
//
// Threading: the loop's thread only (the background thread, or a blocking caller that drives
// the loop while that one sleeps: one at a time, under BackgroundLoop::loop_mu_). Nothing here
// blocks: what a peer cannot take yet is kept and sent by later calls (a round message is 48
// bytes plus 4 per cache id).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/hierarchy_rule.h"
#include "kolo/status.h"

namespace kolo {

// How the ranks of a job exchange a round's messages; the same on every rank (it depends on
// the job's size only).
//   kAllToAll: every rank sends its own message to every peer (n - 1 messages a rank, one hop).
//   kDissemination: ceil(log2 n) steps; at step s rank r sends what it has combined so far (the
//     messages of ranks r - 2^s + 1 .. r, mod n) to rank r + 2^s and combines what rank r - 2^s
//     sent it (one message a rank a step; the windows may overlap for n not a power of two,
//     which the combine, being idempotent, does not notice). So that a round one rank starts
//     reaches the others in ceil(log2 n) hops, not along the steps' slow chain, the start is
//     also broadcast along a binomial tree over the same connections: a rank that starts a
//     round sends a `notice` (a header, no ids) for steps 1.. at once, and a rank that receives
//     a notice for step s forwards it for the steps below s, to each peer whose step message has
//     not gone out yet (that message tells of the round itself). At most 2 ceil(log2 n) - 1
//     messages a rank a round, ceil(log2 n) of them carrying ids.
enum class RoundPattern { kAllToAll, kDissemination };
// Up to this many ranks rounds go all-to-all (one hop; two when one rank starts the round).
// Dissemination takes ceil(log2 n) hops (2 ceil(log2 n) when one rank starts) and sends
// ceil(log2 n) to 2 ceil(log2 n) - 1 messages a rank: at 5-7 ranks that is no fewer than
// all-to-all's n - 1, at 8 it saves two for two more hops; from 9 on it sends fewer in every
// case, and the gap grows (docs/FAST-PATH.md, kolo-round-sim).
constexpr int kAllToAllMaxRanks = 8;
RoundPattern RoundPatternFor(int size);
// Dissemination steps of a job of `size`: ceil(log2 size) (0 for one rank).
int RoundSteps(int size);
// The peer `rank` sends to at dissemination step `step`, and the one it receives from.
int RoundSendPeer(int rank, int size, int step);
int RoundReceivePeer(int rank, int size, int step);
// The ranks `rank` exchanges round messages with under RoundPatternFor(size), ascending: every
// other rank for all-to-all, else rank ± 2^s (mod size). Symmetric: q is a peer of r iff r is a
// peer of q, so each pair needs one connection, made by both or by neither.
std::vector<int> RoundPeersOf(int rank, int size);

// Small allreduces' inputs riding in a round message (RoundMessage::eager), ascending by id, a
// subset of the message's ready ids. In a message this rank makes, each points at its op's
// input (the entry's, alive and unchanged until the op completed); in a received one, into
// `owned`, which a move keeps in place and a copy re-points.
struct RoundEager {
  struct Input {
    uint32_t id = 0;
    uint32_t bytes = 0;
    const uint8_t* data = nullptr;
  };
  std::vector<Input> inputs;
  std::vector<uint8_t> owned;  // a received message's bytes

  RoundEager() = default;
  RoundEager(const RoundEager& other) { *this = other; }
  RoundEager& operator=(const RoundEager& other);
  RoundEager(RoundEager&&) noexcept = default;
  RoundEager& operator=(RoundEager&&) noexcept = default;

  bool empty() const { return inputs.empty(); }
  void clear() {
    inputs.clear();
    owned.clear();
  }
  // The input of `id`, or null when this message does not carry it.
  const Input* Find(uint32_t id) const;
};
bool operator==(const RoundEager& a, const RoundEager& b);

// A lone allreduce whose input this rank staged in the data plane before sending the message
// (Executor::StageInput; docs/FAST-PATH.md, "Staged inputs"): its cache id (0: none) and the number
// of the exchange it was staged for. Combined, it stays only where every message has the same.
struct RoundStaged {
  uint32_t id = 0;
  uint64_t exchange = 0;
  bool has_value() const { return id != 0; }
};
inline bool operator==(const RoundStaged& a, const RoundStaged& b) {
  return a.id == b.id && a.exchange == b.exchange;
}

// One rank's part of one round, or (dissemination) what a rank combined of several ranks'
// parts: the same fields, combined as RoundAgreement's decision combines them.
struct RoundMessage {
  uint64_t round = 0;  // 1, 2, 3, ... on every rank
  uint32_t step = 0;   // dissemination: the step it was sent at; all-to-all: 0
  // Dissemination: only tells that the round started (the fields below are empty).
  bool notice = false;
  uint64_t received_seq = 0;  // the highest controller response sequence number received
  bool joined = false;        // a join of this rank is in flight: ready for every allreduce
  bool stopping = false;      // this rank called shutdown(): it sends every op to the controller
  // This rank's KOLO_FUSION_THRESHOLD: a round fuses under the smallest, so that ranks that
  // were configured differently still cut the same responses.
  uint64_t fusion_threshold = 0;
  // Allreduces of at least this many bytes run hierarchically (core/hierarchy_rule.h): this
  // rank's KOLO_HIERARCHICAL rule, or the tuned one (KOLO_AUTOTUNE); a round takes the smallest,
  // so that every rank runs each op the same way. kHierarchyFlat: never (and no limit).
  uint64_t hierarchy_min_bytes = kHierarchyFlat;
  std::vector<uint32_t> ready;     // cache ids of this rank's waiting cached ops, sorted
  std::vector<uint32_t> diverted;  // cache ids this rank sent to the controller instead, sorted
  // All-to-all only: the input bytes of some of this rank's ready allreduces (KOLO_EAGER_BYTES,
  // docs/FAST-PATH.md, "Eager"), so that a round that decides one whose every member sent
  // them runs it without the data plane. Empty in combined messages and notices.
  RoundEager eager;
  RoundStaged staged;  // none in notices
};
bool operator==(const RoundMessage& a, const RoundMessage& b);

class RoundLane {
 public:
  virtual ~RoundLane() = default;

  // Sends `message` to every peer with a round connection that has not closed (a failed send
  // reports the peer as closed from the next Poll).
  virtual Status SendToAll(const RoundMessage& message) = 0;

  // Sends `message` to `peer` alone, if its connection is open (as SendToAll); a peer without a
  // round connection is an Internal error (a bug in the pattern).
  virtual Status SendTo(int peer, const RoundMessage& message) = 0;

  // Reads whatever arrived without blocking and appends every complete message to `out` as
  // (sender rank, message), in arrival order per sender. A peer that closed its connection is
  // reported in `closed` (once); a malformed message is an error naming the sender.
  virtual Status Poll(std::vector<std::pair<int, RoundMessage>>* out, std::vector<int>* closed) = 0;

  // File descriptors that become readable when Poll has something to do, once Arm() said so.
  virtual std::vector<int> fds() const = 0;

  // Called before the thread stops polling to wait on fds(): from now until the next Poll,
  // anything that arrives makes fds() readable. False if something has arrived already (Poll
  // instead of waiting). A lane that always makes fds() readable returns true; one that rings
  // only sleepers (the shared-memory lane) saves its peers that work while this rank polls.
  virtual bool Arm() { return true; }

  // Called when the thread's wait on fds() has returned (for whatever reason): a lane that
  // does not read its connections on every Poll reads them on the next.
  virtual void Woken() {}

  // True if fds() become readable only while armed: a thread that polls the lane itself
  // while another sleeps on fds() (BackgroundLoop::Drive) need not mute them.
  virtual bool wakes_only_when_armed() const { return false; }

  // True if the messages go through shared memory (then KOLO_EAGER_BYTES unset sends no eager
  // inputs: docs/FAST-PATH.md, "Eager").
  virtual bool shared_memory() const { return false; }
};

}  // namespace kolo
