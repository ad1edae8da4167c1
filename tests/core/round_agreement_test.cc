// RoundAgreement: what a complete round decides, and the protocol errors it refuses.
#include "core/loop/round_agreement.h"

#include <catch2/catch.hpp>

#include "core/messages.h"

using namespace kolo;

namespace {

RoundMessage Msg(uint64_t round, uint64_t seq, std::vector<uint32_t> ready,
                 std::vector<uint32_t> diverted = {}, bool joined = false, bool stopping = false) {
  RoundMessage m;
  m.round = round;
  m.received_seq = seq;
  m.ready = std::move(ready);
  m.diverted = std::move(diverted);
  m.joined = joined;
  m.stopping = stopping;
  return m;
}

const auto kNow = std::chrono::steady_clock::now();

}  // namespace

TEST_CASE("A round runs the ids every rank has, after the highest sequence any rank received",
          "[core][fastpath]") {
  RoundAgreement rounds(1, 3);
  RoundMessage mine = Msg(0, 4, {2, 5, 7});
  rounds.RecordSent(&mine, kNow);
  CHECK(mine.round == 1);
  CHECK(rounds.waiting());
  REQUIRE(rounds.Receive(0, Msg(1, 6, {2, 7, 9})).ok());
  CHECK(rounds.missing() == std::vector<int>{2});
  CHECK_FALSE(rounds.TakeDecision().has_value());
  REQUIRE(rounds.Receive(2, Msg(1, 5, {1, 2, 7})).ok());
  std::optional<RoundDecision> d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  CHECK(d->round == 1);
  CHECK(d->run_through_seq == 6);
  CHECK(d->runnable == std::vector<uint32_t>{2, 7});
  CHECK(d->diverted.empty());
  CHECK_FALSE(d->stopping);
  CHECK_FALSE(rounds.waiting());
  CHECK(rounds.current_round() == 2);
}

TEST_CASE("Joined ranks count as ready; diverted ids never run; stopping is reported",
          "[core][fastpath]") {
  RoundAgreement rounds(0, 3);
  RoundMessage mine = Msg(0, 0, {3, 4, 8}, {});
  rounds.RecordSent(&mine, kNow);
  REQUIRE(rounds.Receive(1, Msg(1, 0, {}, {}, /*joined=*/true)).ok());
  REQUIRE(rounds.Receive(2, Msg(1, 0, {3, 4, 8}, {4}, false, /*stopping=*/true)).ok());
  std::optional<RoundDecision> d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  CHECK(d->runnable == std::vector<uint32_t>{3, 8});
  CHECK(d->diverted == std::vector<uint32_t>{4});
  CHECK(d->stopping);
}

TEST_CASE("When every rank has joined, whatever any rank has ready runs", "[core][fastpath]") {
  RoundAgreement rounds(0, 2);
  RoundMessage mine = Msg(0, 0, {6}, {}, true);
  rounds.RecordSent(&mine, kNow);
  REQUIRE(rounds.Receive(1, Msg(1, 0, {}, {}, true)).ok());
  std::optional<RoundDecision> d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  CHECK(d->runnable == std::vector<uint32_t>{6});
}

TEST_CASE("Ops a joined rank cannot stand in for run only when every rank, joined or not, has them",
          "[core][fastpath]") {
  const uint32_t bit = kEveryRankCacheIdBit;
  RoundAgreement rounds(0, 3);
  RoundMessage mine = Msg(0, 0, {3, 1 | bit, 2 | bit}, {});
  rounds.RecordSent(&mine, kNow);
  REQUIRE(rounds.Receive(1, Msg(1, 0, {2 | bit}, {}, /*joined=*/true)).ok());
  REQUIRE(rounds.Receive(2, Msg(1, 0, {3, 1 | bit, 2 | bit}, {})).ok());
  std::optional<RoundDecision> d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  // 3: rank 1 joined, so it stands in; 1|bit: rank 1 does not have it; 2|bit: every rank does.
  CHECK(d->runnable == std::vector<uint32_t>{3, 2 | bit});

  // Combined in any order and grouping, the same.
  RoundMessage a = Msg(1, 0, {3, 1 | bit, 2 | bit}, {});
  RoundMessage j = Msg(1, 0, {2 | bit}, {}, true);
  RoundMessage c = a;
  CombineRound(&c, j);
  CHECK(c.ready == std::vector<uint32_t>{3, 2 | bit});
  RoundMessage reversed = j;
  CombineRound(&reversed, a);
  CHECK(reversed.ready == c.ready);
  RoundMessage joined_pair = j;
  CombineRound(&joined_pair, Msg(1, 0, {5, 2 | bit, 4 | bit}, {}, true));
  CHECK(joined_pair.ready == std::vector<uint32_t>{5, 2 | bit});  // allreduces: either's
}

TEST_CASE("A peer's next round waits until the current one is complete", "[core][fastpath]") {
  RoundAgreement rounds(0, 2);
  CHECK_FALSE(rounds.must_answer());
  REQUIRE(rounds.Receive(1, Msg(1, 3, {1})).ok());
  CHECK(rounds.must_answer());  // rank 1 started round 1: answer at once
  RoundMessage mine = Msg(0, 3, {});
  rounds.RecordSent(&mine, kNow);
  CHECK_FALSE(rounds.must_answer());
  // Rank 1 completed round 1 and started round 2 before this rank read its round-1 decision.
  REQUIRE(rounds.Receive(1, Msg(2, 4, {1})).ok());
  std::optional<RoundDecision> first = rounds.TakeDecision();
  REQUIRE(first.has_value());
  CHECK(first->runnable.empty());
  CHECK(rounds.must_answer());
  CHECK_FALSE(rounds.TakeDecision().has_value());  // round 2 lacks this rank's message
  RoundMessage second = Msg(0, 4, {1});
  rounds.RecordSent(&second, kNow);
  CHECK(second.round == 2);
  std::optional<RoundDecision> d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  CHECK(d->runnable == std::vector<uint32_t>{1});
  CHECK(d->run_through_seq == 4);
}

TEST_CASE(
    "A round fuses under the smallest threshold and goes hierarchical from the smallest rule any "
    "rank sent",
    "[core][fastpath]") {
  RoundAgreement rounds(0, 3);
  RoundMessage mine = Msg(0, 0, {1});
  mine.fusion_threshold = 64 << 20;
  mine.hierarchy_min_bytes = UINT64_MAX;  // flat: a rank that does not tune with KOLO_AUTOTUNE
  rounds.RecordSent(&mine, kNow);
  RoundMessage a = Msg(1, 0, {1});
  a.fusion_threshold = 4096;
  a.hierarchy_min_bytes = 1 << 20;
  RoundMessage b = Msg(1, 0, {1});
  b.fusion_threshold = 1 << 20;
  b.hierarchy_min_bytes = 8192;
  REQUIRE(rounds.Receive(1, a).ok());
  REQUIRE(rounds.Receive(2, b).ok());
  std::optional<RoundDecision> d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  CHECK(d->fusion_threshold == 4096);
  CHECK(d->hierarchy_min_bytes == 8192);
  // 0 (always hierarchical) is a rule like any other, and the smallest.
  RoundMessage next = Msg(0, 0, {});
  rounds.RecordSent(&next, kNow);
  RoundMessage always = Msg(2, 0, {});
  always.hierarchy_min_bytes = 0;
  REQUIRE(rounds.Receive(1, Msg(2, 0, {})).ok());
  REQUIRE(rounds.Receive(2, always).ok());
  d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  CHECK(d->hierarchy_min_bytes == 0);
}

TEST_CASE("A rank that left after stopping no longer holds rounds up", "[core][fastpath]") {
  RoundAgreement rounds(0, 3);
  RoundMessage mine = Msg(0, 9, {});
  rounds.RecordSent(&mine, kNow);
  REQUIRE(rounds.Receive(1, Msg(1, 9, {})).ok());
  CHECK(rounds.missing() == std::vector<int>{2});
  CHECK_FALSE(rounds.TakeDecision().has_value());
  rounds.Depart(2);
  CHECK(rounds.missing().empty());
  std::optional<RoundDecision> d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  CHECK(d->stopping);
  CHECK(d->runnable.empty());
  CHECK(d->run_through_seq == 9);
  // And the next rounds too.
  RoundMessage next = Msg(0, 10, {});
  rounds.RecordSent(&next, kNow);
  REQUIRE(rounds.Receive(1, Msg(2, 10, {})).ok());
  REQUIRE(rounds.TakeDecision().has_value());
}

TEST_CASE("A single rank decides its own rounds", "[core][fastpath]") {
  RoundAgreement rounds(0, 1);
  RoundMessage mine = Msg(0, 2, {1, 2});
  rounds.RecordSent(&mine, kNow);
  std::optional<RoundDecision> d = rounds.TakeDecision();
  REQUIRE(d.has_value());
  CHECK(d->runnable == std::vector<uint32_t>{1, 2});
  CHECK(d->run_through_seq == 2);
}

TEST_CASE("Round protocol errors name the sender and change nothing", "[core][fastpath]") {
  RoundAgreement rounds(0, 3);
  Status s = rounds.Receive(1, Msg(3, 0, {}));
  CHECK(s.code() == StatusCode::kInternal);
  CHECK_THAT(s.message(), Catch::Contains("rank 1 sent a message for round 3") &&
                              Catch::Contains("rank 0 is in round 1"));
  s = rounds.Receive(0, Msg(1, 0, {}));
  CHECK_THAT(s.message(), Catch::Contains("not a peer of rank 0"));
  s = rounds.Receive(5, Msg(1, 0, {}));
  CHECK_THAT(s.message(), Catch::Contains("rank 5"));
  s = rounds.Receive(1, Msg(2, 0, {}));  // round 2 cannot start before this rank's round 1
  CHECK_THAT(s.message(), Catch::Contains("rank 1 sent a message for round 2"));
  s = rounds.Receive(2, Msg(1, 0, {4, 4}));
  CHECK_THAT(s.message(), Catch::Contains("rank 2 sent cache ids out of order"));
  REQUIRE(rounds.Receive(2, Msg(1, 0, {4})).ok());
  s = rounds.Receive(2, Msg(1, 0, {4}));
  CHECK_THAT(s.message(), Catch::Contains("rank 2 sent two messages for round 1"));
  CHECK(rounds.must_answer());
  RoundMessage mine = Msg(0, 0, {4});
  rounds.RecordSent(&mine, kNow);
  CHECK(rounds.missing() == std::vector<int>{1});
}
