// The round patterns (core/round_lane.h): whichever pattern carries a round, every rank decides
// what combining all ranks' messages at once decides (the rule all-to-all rounds have always
// used, restated here as the reference), over random messages, rank counts 1..67 and random
// delivery orders, rounds started by some ranks and joined by the others, the next round's
// messages arriving early; and the dissemination pattern's peers, protocol errors and departed
// ranks.
#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <iterator>
#include <map>
#include <random>
#include <string>

#include "core/loop/round_agreement.h"
#include "core/messages.h"

using namespace kolo;

namespace {

const auto kPatternNow = std::chrono::steady_clock::now();

// The decision as all-to-all rounds computed it before the patterns existed, from all messages,
// and for the ids with kEveryRankCacheIdBit the ones every message has, joined or not.
RoundDecision Reference(const std::vector<RoundMessage>& all) {
  RoundDecision d;
  d.fusion_threshold = UINT64_MAX;
  d.hierarchy_min_bytes = UINT64_MAX;
  const RoundMessage* first_ready = nullptr;
  for (const RoundMessage& m : all) {
    d.run_through_seq = std::max(d.run_through_seq, m.received_seq);
    std::vector<uint32_t> diverted;
    std::set_union(d.diverted.begin(), d.diverted.end(), m.diverted.begin(), m.diverted.end(),
                   std::back_inserter(diverted));
    d.diverted = diverted;
    d.stopping = d.stopping || m.stopping;
    d.fusion_threshold = std::min(d.fusion_threshold, m.fusion_threshold);
    d.hierarchy_min_bytes = std::min(d.hierarchy_min_bytes, m.hierarchy_min_bytes);
    if (!m.joined && first_ready == nullptr) first_ready = &m;
  }
  if (first_ready != nullptr) {
    d.runnable = first_ready->ready;
    for (const RoundMessage& m : all) {
      if (m.joined) continue;
      std::vector<uint32_t> both;
      std::set_intersection(d.runnable.begin(), d.runnable.end(), m.ready.begin(), m.ready.end(),
                            std::back_inserter(both));
      d.runnable = both;
    }
  } else {
    for (const RoundMessage& m : all) {
      std::vector<uint32_t> either;
      std::set_union(d.runnable.begin(), d.runnable.end(), m.ready.begin(), m.ready.end(),
                     std::back_inserter(either));
      d.runnable = either;
    }
  }
  d.runnable.erase(std::lower_bound(d.runnable.begin(), d.runnable.end(), kEveryRankCacheIdBit),
                   d.runnable.end());
  std::vector<uint32_t> every = all.at(0).ready;
  for (const RoundMessage& m : all) {
    std::vector<uint32_t> both;
    std::set_intersection(every.begin(), every.end(), m.ready.begin(), m.ready.end(),
                          std::back_inserter(both));
    every = both;
  }
  for (uint32_t id : every) {
    if (NeedsEveryRank(id)) d.runnable.push_back(id);
  }
  std::vector<uint32_t> kept;
  std::set_difference(d.runnable.begin(), d.runnable.end(), d.diverted.begin(), d.diverted.end(),
                      std::back_inserter(kept));
  d.runnable = kept;
  return d;
}

// Ids 1..universe, each with probability p, then the same for the ids that need every rank.
std::vector<uint32_t> RandomIds(std::mt19937* rng, uint32_t universe, double p) {
  std::vector<uint32_t> ids;
  std::bernoulli_distribution take(p);
  for (uint32_t bit : {0u, kEveryRankCacheIdBit}) {
    for (uint32_t id = 1; id <= universe; ++id) {
      if (take(*rng)) ids.push_back(id | bit);
    }
  }
  return ids;
}

RoundMessage RandomMessage(std::mt19937* rng, bool mostly_joined) {
  RoundMessage m;
  m.received_seq = std::uniform_int_distribution<uint64_t>(0, 50)(*rng);
  m.joined = std::bernoulli_distribution(mostly_joined ? 0.9 : 0.1)(*rng);
  m.stopping = std::bernoulli_distribution(0.05)(*rng);
  m.fusion_threshold = std::uniform_int_distribution<uint64_t>(1, 1 << 20)(*rng);
  m.hierarchy_min_bytes = std::bernoulli_distribution(0.2)(*rng)
                              ? UINT64_MAX
                              : std::uniform_int_distribution<uint64_t>(0, 1 << 20)(*rng);
  // Most ids ready almost everywhere, so that intersections are not always empty.
  m.ready = RandomIds(rng, 12, 0.93);
  m.diverted = RandomIds(rng, 12, 0.02);
  return m;
}

bool SameDecision(const RoundDecision& a, const RoundDecision& b) {
  return a.round == b.round && a.run_through_seq == b.run_through_seq && a.runnable == b.runnable &&
         a.diverted == b.diverted && a.stopping == b.stopping &&
         a.fusion_threshold == b.fusion_threshold && a.hierarchy_min_bytes == b.hierarchy_min_bytes;
}

// `size` ranks run `rounds` rounds with `pattern`; each round's messages are random, a random
// subset of the ranks starts it and the others join when a message of it reaches them; the
// messages in flight are delivered in random order, in order per pair of ranks (as a
// connection delivers them), so a rank that finished round k may send round k + 1 to one still
// in k. Every rank's decision of every round must be the reference's.
void RunJob(int size, RoundPattern pattern, int rounds, std::mt19937* rng) {
  std::vector<RoundAgreement> ranks;
  for (int r = 0; r < size; ++r) ranks.emplace_back(r, size, pattern);
  // The message each rank contributes to each round, drawn up front.
  std::vector<std::vector<RoundMessage>> contributions(rounds + 1);
  for (int k = 1; k <= rounds; ++k) {
    const bool mostly_joined = std::bernoulli_distribution(0.2)(*rng);
    for (int r = 0; r < size; ++r) contributions[k].push_back(RandomMessage(rng, mostly_joined));
  }
  std::vector<int> decided(size, 0);  // rounds decided, by rank
  // Messages in flight, by (from, to), in sending order; `busy` lists the non-empty ones.
  std::map<std::pair<int, int>, std::deque<RoundMessage>> flight;
  auto send_due = [&](int r) {
    std::vector<RoundSend> sends;
    ranks[r].TakeSends(&sends);
    for (RoundSend& s : sends) {
      for (int q = 0; q < size; ++q) {
        if (q != r && (s.to < 0 || s.to == q)) flight[{r, q}].push_back(s.message);
      }
    }
  };
  auto contribute = [&](int r) {
    RoundMessage mine = contributions[ranks[r].current_round()][r];
    ranks[r].RecordSent(&mine, kPatternNow);
    send_due(r);
  };
  auto advance = [&](int r) {
    for (bool moved = true; moved;) {
      moved = false;
      if (decided[r] < rounds && !ranks[r].waiting() && ranks[r].must_answer()) contribute(r);
      std::optional<RoundDecision> d = ranks[r].TakeDecision();
      send_due(r);
      if (!d.has_value()) continue;
      moved = true;
      ++decided[r];
      RoundDecision expected = Reference(contributions[decided[r]]);
      expected.round = static_cast<uint64_t>(decided[r]);
      INFO("size " << size << ", rank " << r << ", round " << decided[r]);
      REQUIRE(SameDecision(*d, expected));
      // Some ranks start the next round at once; the others wait to hear of it.
      if (decided[r] < rounds && std::bernoulli_distribution(0.3)(*rng)) contribute(r);
    }
  };
  // Round 1 starts at a random non-empty subset of the ranks.
  for (int r = 0; r < size; ++r) {
    if (r == 0 || std::bernoulli_distribution(0.2)(*rng)) contribute(r);
    advance(r);
  }
  for (;;) {
    for (auto it = flight.begin(); it != flight.end();) {
      it = it->second.empty() ? flight.erase(it) : std::next(it);
    }
    if (flight.empty()) {
      // Nothing in flight: a rank with a round still to go starts it, as a new op would.
      std::vector<int> idle;
      for (int r = 0; r < size; ++r) {
        if (decided[r] < rounds && !ranks[r].waiting()) idle.push_back(r);
      }
      if (idle.empty()) break;
      const int r = idle[std::uniform_int_distribution<size_t>(0, idle.size() - 1)(*rng)];
      contribute(r);
      advance(r);
      continue;
    }
    auto edge =
        std::next(flight.begin(), static_cast<std::ptrdiff_t>(std::uniform_int_distribution<size_t>(
                                      0, flight.size() - 1)(*rng)));
    const auto [from, to] = edge->first;
    RoundMessage next = std::move(edge->second.front());
    edge->second.pop_front();
    Status received = ranks[to].Receive(from, std::move(next));
    INFO("size " << size << ": " << received.message());
    REQUIRE(received.ok());
    advance(to);
  }
  for (int r = 0; r < size; ++r) {
    INFO("size " << size << ", rank " << r);
    CHECK(decided[r] == rounds);
    CHECK_FALSE(ranks[r].waiting());
  }
}

}  // namespace

TEST_CASE("Every pattern decides what combining all messages at once decides, at 1..67 ranks",
          "[core][fastpath]") {
  std::mt19937 rng(20261129);
  for (int size = 1; size <= 67; ++size) {
    for (int trial = 0; trial < 3; ++trial) {
      RunJob(size, RoundPatternFor(size), 4, &rng);
      if (size >= 2) RunJob(size, RoundPattern::kDissemination, 4, &rng);
    }
  }
}

TEST_CASE("Jobs up to eight ranks go all-to-all, larger ones disseminate over O(log n) peers",
          "[core][fastpath]") {
  CHECK(RoundPatternFor(1) == RoundPattern::kAllToAll);
  CHECK(RoundPatternFor(8) == RoundPattern::kAllToAll);
  CHECK(RoundPatternFor(9) == RoundPattern::kDissemination);
  CHECK(RoundPeersOf(2, 4) == std::vector<int>{0, 1, 3});
  CHECK(RoundPeersOf(0, 9) == std::vector<int>{1, 2, 4, 5, 7, 8});
  CHECK(RoundSteps(1) == 0);
  CHECK(RoundSteps(5) == 3);
  CHECK(RoundSteps(1024) == 10);
  CHECK(RoundSteps(1025) == 11);
  for (int size : {9, 13, 16, 64, 100, 1000, 1024}) {
    const int steps = RoundSteps(size);
    for (int r = 0; r < size; ++r) {
      const std::vector<int> peers = RoundPeersOf(r, size);
      INFO("size " << size << ", rank " << r);
      CHECK(static_cast<int>(peers.size()) <= 2 * steps);
      CHECK(std::find(peers.begin(), peers.end(), r) == peers.end());
      for (int q : peers) {
        const std::vector<int> back = RoundPeersOf(q, size);
        CHECK(std::binary_search(back.begin(), back.end(), r));  // one connection per pair
      }
      for (int s = 0; s < steps; ++s) {
        CHECK(RoundReceivePeer(RoundSendPeer(r, size, s), size, s) == r);
        CHECK(std::binary_search(peers.begin(), peers.end(), RoundSendPeer(r, size, s)));
      }
    }
  }
}

TEST_CASE("A dissemination message from the wrong peer or for a step out of range names its sender",
          "[core][fastpath]") {
  RoundAgreement rounds(0, 6, RoundPattern::kDissemination);  // steps 0..2: ranks 5, 4, 2
  RoundMessage m;
  m.round = 1;
  m.step = 0;
  Status s = rounds.Receive(3, m);
  CHECK(s.code() == StatusCode::kInternal);
  CHECK_THAT(s.message(), Catch::Contains("rank 3 sent a message for step 0 of round 1"));
  m.step = 3;
  s = rounds.Receive(2, m);
  CHECK_THAT(s.message(), Catch::Contains("rank 2 sent a message for step 3"));
  m.step = 2;
  REQUIRE(rounds.Receive(2, m).ok());
  s = rounds.Receive(2, m);
  CHECK_THAT(s.message(), Catch::Contains("rank 2 sent two messages for round 1"));
  CHECK(rounds.must_answer());
  RoundMessage mine;
  rounds.RecordSent(&mine, kPatternNow);
  std::vector<RoundSend> sends;
  rounds.TakeSends(&sends);
  REQUIRE(sends.size() == 1);  // step 0 only: step 1 needs step 0's message from rank 5
  CHECK(sends[0].to == 1);
  CHECK(sends[0].message.step == 0);
  CHECK(rounds.missing() == std::vector<int>{5, 4});

  RoundAgreement all(0, 3);
  RoundMessage stepped;
  stepped.round = 1;
  stepped.step = 1;
  CHECK_THAT(all.Receive(1, stepped).message(),
             Catch::Contains("rank 1 sent step 1 of round 1 to an all-to-all round"));
}

TEST_CASE("A departed rank's dissemination steps count as stopping with nothing ready",
          "[core][fastpath]") {
  // Rank 0 of 5 takes steps 0, 1 and 2 from ranks 4, 3 and 1; rank 3 left after shutdown().
  RoundAgreement rounds(0, 5, RoundPattern::kDissemination);
  RoundMessage mine;
  mine.round = 1;
  mine.ready = {1, 2};
  mine.fusion_threshold = 100;
  RoundMessage from4 = mine;
  from4.received_seq = 7;
  REQUIRE(rounds.Receive(4, from4).ok());
  rounds.RecordSent(&mine, kPatternNow);  // an answer: no notices
  std::vector<RoundSend> sends;
  rounds.TakeSends(&sends);
  CHECK(sends.size() == 2);  // steps 0 and 1
  CHECK_FALSE(rounds.TakeDecision().has_value());
  rounds.Depart(3);
  RoundMessage from1 = mine;
  from1.step = 2;
  REQUIRE(rounds.Receive(1, from1).ok());
  std::optional<RoundDecision> d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  CHECK(d->stopping);
  CHECK(d->runnable.empty());
  CHECK(d->run_through_seq == 7);
  sends.clear();
  rounds.TakeSends(&sends);
  REQUIRE(sends.size() == 1);  // step 2 went out before the round completed
  CHECK(sends[0].to == 4);
  CHECK(sends[0].message.step == 2);
  CHECK(sends[0].message.stopping);
}

TEST_CASE("A rank that starts a round notices every step's peer; a notice is forwarded below it",
          "[core][fastpath]") {
  RoundAgreement starter(0, 8, RoundPattern::kDissemination);
  RoundMessage mine;
  starter.RecordSent(&mine, kPatternNow);
  std::vector<RoundSend> sends;
  starter.TakeSends(&sends);
  REQUIRE(sends.size() == 3);
  CHECK((sends[0].to == 2 && sends[0].message.notice && sends[0].message.step == 1));
  CHECK((sends[1].to == 4 && sends[1].message.notice && sends[1].message.step == 2));
  CHECK((sends[2].to == 1 && !sends[2].message.notice && sends[2].message.step == 0));

  RoundAgreement told(4, 8, RoundPattern::kDissemination);
  REQUIRE(told.Receive(0, sends[1].message).ok());
  CHECK(told.must_answer());
  RoundMessage answer;
  told.RecordSent(&answer, kPatternNow);
  sends.clear();
  told.TakeSends(&sends);
  REQUIRE(sends.size() == 2);  // step 1's notice; step 0's peer hears of it from the data
  CHECK((sends[0].to == 6 && sends[0].message.notice && sends[0].message.step == 1));
  CHECK((sends[1].to == 5 && !sends[1].message.notice));

  RoundAgreement all(0, 3);
  RoundMessage notice;
  notice.round = 1;
  notice.notice = true;
  CHECK_THAT(all.Receive(1, notice).message(),
             Catch::Contains("rank 1 sent a notice of round 1 to an all-to-all round"));
}

TEST_CASE("With a departed rank, a slow rank's peers may run rounds ahead and it still catches up",
          "[core][fastpath]") {
  // Rank `gone` left after stopping; only its receivers know (their lane to it closed). Its
  // stand-in drops what it would have relayed, so ranks downstream of `slow` complete rounds
  // without `slow`'s message: at 9 ranks with rank 2 gone and rank 1 slow, rank 8 reached round
  // 9 while rank 1 was in round 7, which the rounds once refused as a protocol error.
  const int size = GENERATE(9, 13, 33);
  const int rounds = 12;
  std::mt19937 rng(static_cast<unsigned>(size));
  uint64_t leads = 0;  // the most rounds a message was ahead of its receiver, over the trials
  for (int trial = 0; trial < 60; ++trial) {
    const int gone = std::uniform_int_distribution<int>(0, size - 1)(rng);
    std::vector<bool> receives_from_gone(size, false);
    std::vector<int> receivers;
    for (int r = 0; r < size; ++r) {
      for (int s = 0; s < RoundSteps(size); ++s) {
        if (r != gone && RoundReceivePeer(r, size, s) == gone) receives_from_gone[r] = true;
      }
      if (receives_from_gone[r]) receivers.push_back(r);
    }
    // Half the trials: `slow` is one of `gone`'s receivers, and the last to see its lane close.
    int slow = receivers[std::uniform_int_distribution<size_t>(0, receivers.size() - 1)(rng)];
    if (trial % 2 == 1) {
      slow = (gone + 1 + std::uniform_int_distribution<int>(0, size - 2)(rng)) % size;
    }
    bool slow_knows = !receives_from_gone[slow];
    std::vector<RoundAgreement> ranks;
    for (int r = 0; r < size; ++r) {
      ranks.emplace_back(r, size, RoundPattern::kDissemination);
      if (receives_from_gone[r] && r != slow) ranks[r].Depart(gone);
    }
    std::vector<int> decided(size, 0);
    std::map<std::pair<int, int>, std::deque<RoundMessage>> flight;
    uint64_t most_ahead = 0;
    auto send_due = [&](int r) {
      std::vector<RoundSend> sends;
      ranks[r].TakeSends(&sends);
      for (RoundSend& s : sends) {
        if (s.to != gone) flight[{r, s.to}].push_back(s.message);
      }
    };
    auto advance = [&](int r) {
      for (bool moved = true; moved;) {
        moved = false;
        if (decided[r] < rounds && !ranks[r].waiting() && ranks[r].must_answer()) {
          RoundMessage mine;  // after stopping: nothing ready
          mine.stopping = true;
          mine.received_seq = static_cast<uint64_t>(r);
          ranks[r].RecordSent(&mine, kPatternNow);
        }
        std::optional<RoundDecision> d = ranks[r].TakeDecision();
        send_due(r);
        if (!d.has_value()) continue;
        moved = true;
        ++decided[r];
        INFO("size " << size << ", rank " << r << ", round " << decided[r]);
        CHECK(d->round == static_cast<uint64_t>(decided[r]));
        CHECK(d->stopping);
        CHECK(d->runnable.empty());
      }
    };
    for (;;) {
      // Deliver to every rank but `slow` first; while only `slow` has messages waiting, the
      // others start new rounds (as new ops would) as often as it gets one, so they run as far
      // ahead of it as the rounds let them.
      auto pick = flight.end();
      for (auto it = flight.begin(); it != flight.end(); ++it) {
        if (it->second.empty()) continue;
        if (pick == flight.end() || (pick->first.second == slow && it->first.second != slow)) {
          pick = it;
        }
      }
      std::vector<int> idle;
      for (int r = 0; r < size; ++r) {
        if (r != gone && decided[r] < rounds && !ranks[r].waiting()) {
          if (r != slow || pick == flight.end()) idle.push_back(r);
        }
      }
      const bool only_slow_waits = pick != flight.end() && pick->first.second == slow;
      if (pick == flight.end() ||
          (only_slow_waits && !idle.empty() && std::bernoulli_distribution(0.5)(rng))) {
        if (idle.empty() && pick == flight.end()) {
          if (slow_knows) break;
          slow_knows = true;  // nothing else can move: `slow` sees the lane to `gone` close
          ranks[slow].Depart(gone);
          advance(slow);
          continue;
        }
        if (idle.empty()) break;
        const int r = idle[std::uniform_int_distribution<size_t>(0, idle.size() - 1)(rng)];
        RoundMessage mine;
        mine.stopping = true;
        ranks[r].RecordSent(&mine, kPatternNow);
        advance(r);
        continue;
      }
      const auto [from, to] = pick->first;
      RoundMessage next = std::move(pick->second.front());
      pick->second.pop_front();
      if (next.round > ranks[to].current_round()) {
        most_ahead = std::max(most_ahead, next.round - ranks[to].current_round());
      }
      Status received = ranks[to].Receive(from, std::move(next));
      INFO("size " << size << ", rank " << gone << " gone, rank " << slow
                   << " slow: " << received.message());
      REQUIRE(received.ok());
      advance(to);
    }
    for (int r = 0; r < size; ++r) {
      if (r == gone) continue;
      INFO("size " << size << ", rank " << r << " (rank " << gone << " gone, " << slow << " slow)");
      CHECK(decided[r] == rounds);
      CHECK_FALSE(ranks[r].waiting());
    }
    leads = std::max(leads, most_ahead);
  }
  // The schedule must produce what the test is about, or it proves nothing.
  INFO("size " << size);
  CHECK(leads >= 2);
}
