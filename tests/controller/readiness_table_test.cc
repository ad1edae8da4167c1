#include "controller/readiness_table.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/controller/test_requests.h"

namespace Catch {
template <>
struct StringMaker<kolo::controller::NegotiationEvent> {
  static std::string convert(const kolo::controller::NegotiationEvent& e) {
    static const char* const kKinds[] = {"begin", "announce", "end"};
    return std::string(kKinds[static_cast<int>(e.kind)]) + " '" + e.name + "' " +
           kolo::OpTypeName(e.op) + " rank " + std::to_string(e.rank);
  }
};
}  // namespace Catch

namespace kolo::controller {
namespace {

using testing::kT0;
using testing::Meta;

std::vector<std::string> Names(const std::vector<ReadyTensor>& ready) {
  std::vector<std::string> names;
  for (const ReadyTensor& t : ready) names.push_back(t.meta.name);
  return names;
}

struct Announcement {
  int rank;
  std::string name;
};

// Every rank announces every name once, each rank in its own order, the ranks' streams
// interleaved at random (a fixed seed per case).
std::vector<Announcement> Interleaving(int size, int num_names, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<std::string>> per_rank(size);
  for (int r = 0; r < size; ++r) {
    for (int n = 0; n < num_names; ++n) per_rank[r].push_back("t" + std::to_string(n));
    std::shuffle(per_rank[r].begin(), per_rank[r].end(), rng);
  }
  std::vector<Announcement> out;
  std::vector<size_t> next(size, 0);
  while (out.size() < static_cast<size_t>(size * num_names)) {
    const int r = static_cast<int>(rng() % size);
    if (next[r] < per_rank[r].size()) out.push_back({r, per_rank[r][next[r]++]});
  }
  return out;
}

TEST_CASE("A name is ready exactly when the last rank announces it, in completion order",
          "[controller][readiness]") {
  const int size = GENERATE(range(1, 9));
  const unsigned seed = GENERATE(1u, 2u, 3u, 4u, 5u);
  const int num_names = 6;
  CAPTURE(size, seed);

  ReadinessTable table(size);
  std::vector<ReadyTensor> ready;
  std::vector<std::string> expected_order;
  std::map<std::string, int> seen;
  for (const Announcement& a : Interleaving(size, num_names, seed)) {
    const size_t before = ready.size();
    REQUIRE(table.Announce(a.rank, Meta(a.name), kT0, &ready).ok());
    const bool completes = ++seen[a.name] == size;
    if (completes) expected_order.push_back(a.name);
    REQUIRE(ready.size() == before + (completes ? 1 : 0));
  }
  CHECK(Names(ready) == expected_order);
  CHECK(table.pending_count() == 0);
  for (const ReadyTensor& t : ready) CHECK_FALSE(t.is_error());
}

TEST_CASE("Readiness follows completion, not first announcement", "[controller][readiness]") {
  ReadinessTable table(2);
  std::vector<ReadyTensor> ready;
  REQUIRE(table.Announce(0, Meta("a"), kT0, &ready).ok());
  REQUIRE(table.Announce(0, Meta("b"), kT0, &ready).ok());
  REQUIRE(table.Announce(1, Meta("b"), kT0, &ready).ok());
  CHECK(table.MissingRanks("a") == std::vector<int>{1});
  REQUIRE(table.Announce(1, Meta("a"), kT0, &ready).ok());
  CHECK(Names(ready) == std::vector<std::string>{"b", "a"});
  CHECK(table.MissingRanks("a").empty());
}

TEST_CASE("A mismatch is reported at completion against rank 0, whatever the arrival order",
          "[controller][readiness]") {
  const int size = 4;
  std::vector<int> order = {0, 1, 2, 3};
  const int rotation = GENERATE(0, 1, 2, 3);
  std::rotate(order.begin(), order.begin() + rotation, order.end());
  if (GENERATE(false, true)) std::reverse(order.begin(), order.end());
  CAPTURE(order);

  ReadinessTable table(size);
  std::vector<ReadyTensor> ready;
  for (int rank : order) {
    REQUIRE(table
                .Announce(rank,
                          Meta("grad/w1",
                               rank == 3 ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{2, 3}),
                          kT0, &ready)
                .ok());
    REQUIRE(ready.size() == (rank == order.back() ? 1u : 0u));
  }
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].error ==
        "Mismatched allreduce shapes for 'grad/w1': rank 0 sent [2, 3], rank 3 sent [3, 2]");
  CHECK(ready[0].meta.shape == std::vector<int64_t>{2, 3});
}

TEST_CASE("When rank 0 is the odd one out, the first other rank is named",
          "[controller][readiness]") {
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  REQUIRE(table.Announce(1, Meta("x"), kT0, &ready).ok());
  REQUIRE(table.Announce(2, Meta("x"), kT0, &ready).ok());
  REQUIRE(table.Announce(0, Meta("x", {4}, DataType::kInt32), kT0, &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].error == "Mismatched data types for 'x': rank 0 sent int32, rank 1 sent float32");
}

TEST_CASE("Announcing a pending name twice is a protocol error", "[controller][readiness]") {
  ReadinessTable table(2);
  std::vector<ReadyTensor> ready;
  REQUIRE(table.Announce(1, Meta("x"), kT0, &ready).ok());
  Status status = table.Announce(1, Meta("x"), kT0, &ready);
  CHECK(status.code() == StatusCode::kInternal);
  CHECK(status.message() == "rank 1 announced 'x' twice before it was ready");
  // After completion the name is free again.
  REQUIRE(table.Announce(0, Meta("x"), kT0, &ready).ok());
  REQUIRE(table.Announce(1, Meta("x"), kT0, &ready).ok());
  CHECK(ready.size() == 1);
  CHECK(table.MissingRanks("x") == std::vector<int>{0});
}

TEST_CASE("Announcements by cache id are found by id, in full or by id first, round after round",
          "[controller][readiness][cache]") {
  constexpr uint32_t kId = 7;
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  for (int round = 0; round < 3; ++round) {
    // Round 1 starts in full (a rank whose cache had no id yet), the others by id.
    REQUIRE(table.Announce(2, Meta("x"), kT0, &ready, nullptr, round == 1 ? 0 : kId).ok());
    CHECK(table.Announce(2, Meta("x"), kT0, &ready, nullptr, kId).message() ==
          "rank 2 announced 'x' twice before it was ready");
    REQUIRE(table.Announce(0, Meta("x"), kT0, &ready, nullptr, kId).ok());
    CHECK(table.Announce(0, Meta("x"), kT0, &ready, nullptr, kId).message() ==
          "rank 0 announced 'x' twice before it was ready");
    CHECK(table.MissingRanks("x") == std::vector<int>{1});
    REQUIRE(table.Announce(1, Meta("x"), kT0, &ready, nullptr, kId).ok());
    REQUIRE(ready.size() == static_cast<size_t>(round + 1));
    CHECK(ready.back().meta.name == "x");
    CHECK_FALSE(ready.back().is_error());
    CHECK(table.pending_count() == 0);
  }
}

TEST_CASE("AnnounceById counts a rank into a name pending by the same id, as Announce would",
          "[controller][readiness][cache]") {
  constexpr uint32_t kId = 7;
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  CHECK_FALSE(table.AnnounceById(0, kId, &ready));  // nothing pending: Announce opens it
  REQUIRE(table.Announce(2, Meta("x"), kT0, &ready, nullptr, kId).ok());
  CHECK_FALSE(table.AnnounceById(2, kId, &ready));  // twice: Announce reports it
  CHECK(table.AnnounceById(0, kId, &ready));
  CHECK(table.MissingRanks("x") == std::vector<int>{1});
  CHECK(ready.empty());
  CHECK(table.AnnounceById(1, kId, &ready));
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].meta == Meta("x"));
  CHECK_FALSE(ready[0].is_error());
  CHECK(table.pending_count() == 0);
  CHECK_FALSE(table.AnnounceById(1, kId, &ready));  // the name is no longer pending
}

TEST_CASE("AnnounceById leaves to Announce a name first announced in full, a join, a departure",
          "[controller][readiness][cache]") {
  constexpr uint32_t kId = 7;
  std::vector<ReadyTensor> ready;
  SECTION("first announced in full: the id's metadata may differ from it") {
    ReadinessTable table(3);
    REQUIRE(table.Announce(0, Meta("x", {5}), kT0, &ready).ok());
    REQUIRE(table.Announce(1, Meta("x", {4}), kT0, &ready, nullptr, kId).ok());  // indexed now
    CHECK_FALSE(table.AnnounceById(2, kId, &ready));
    REQUIRE(table.Announce(2, Meta("x", {4}), kT0, &ready, nullptr, kId).ok());
    REQUIRE(ready.size() == 1);
    CHECK(ready[0].error ==
          "Mismatched allreduce shapes for 'x': rank 0 sent [5], rank 1 sent [4]");
  }
  SECTION("a rank that shut down") {
    ReadinessTable table(3);
    REQUIRE(table.Announce(0, Meta("x"), kT0, &ready, nullptr, kId).ok());
    REQUIRE(table.Announce(1, Meta("x"), kT0, &ready, nullptr, kId).ok());
    table.MarkShutdown(1, &ready);
    CHECK_FALSE(table.AnnounceById(1, kId, &ready));
    CHECK(table.Announce(1, Meta("x"), kT0, &ready, nullptr, kId).message() ==
          "rank 1 announced 'x' after its shutdown notice");
  }
  SECTION("while a rank has joined, and the join itself") {
    ReadinessTable table(3);
    TensorMeta join = Meta("kolo.join", {0}, DataType::kUInt8);
    join.op = OpType::kJoin;
    REQUIRE(table.Announce(0, Meta("x"), kT0, &ready, nullptr, kId).ok());
    REQUIRE(table.Announce(2, join, kT0, &ready, nullptr, kId + 1).ok());
    CHECK_FALSE(table.AnnounceById(1, kId, &ready));  // 'x' completes without rank 2: Announce
    CHECK_FALSE(table.AnnounceById(1, kId + 1, &ready));
    REQUIRE(table.Announce(1, Meta("x"), kT0, &ready, nullptr, kId).ok());
    REQUIRE(ready.size() == 1);
    CHECK(ready[0].meta.name == "x");
  }
}

TEST_CASE("Steps announced by id through AnnounceById end as Announce's do, order included",
          "[controller][readiness][cache]") {
  constexpr int kSize = 5;
  constexpr int kNames = 12;
  for (unsigned seed = 1; seed <= 4; ++seed) {
    ReadinessTable plain(kSize);
    ReadinessTable fast(kSize);
    std::vector<ReadyTensor> plain_ready;
    std::vector<ReadyTensor> fast_ready;
    for (int step = 0; step < 3; ++step) {
      for (const Announcement& a : Interleaving(kSize, kNames, seed * 10 + step)) {
        const uint32_t id = static_cast<uint32_t>(std::stoi(a.name.substr(1)) + 1);
        REQUIRE(plain.Announce(a.rank, Meta(a.name), kT0, &plain_ready, nullptr, id).ok());
        if (!fast.AnnounceById(a.rank, id, &fast_ready)) {
          REQUIRE(fast.Announce(a.rank, Meta(a.name), kT0, &fast_ready, nullptr, id).ok());
        }
      }
      CHECK(fast.pending_count() == 0);
    }
    CHECK(Names(fast_ready) == Names(plain_ready));
    CHECK(fast_ready.size() == static_cast<size_t>(3 * kNames));
  }
}

TEST_CASE("Full metadata that differs from a cached id's is a mismatch, whatever came first",
          "[controller][readiness][cache]") {
  constexpr uint32_t kId = 3;
  for (bool id_first : {true, false}) {
    ReadinessTable table(2);
    std::vector<ReadyTensor> ready;
    if (id_first) {
      REQUIRE(table.Announce(0, Meta("x", {4}), kT0, &ready, nullptr, kId).ok());
      REQUIRE(table.Announce(1, Meta("x", {5}), kT0, &ready).ok());
    } else {
      REQUIRE(table.Announce(1, Meta("x", {5}), kT0, &ready).ok());
      REQUIRE(table.Announce(0, Meta("x", {4}), kT0, &ready, nullptr, kId).ok());
    }
    REQUIRE(ready.size() == 1);
    CHECK(ready[0].error ==
          "Mismatched allreduce shapes for 'x': rank 0 sent [4], rank 1 sent [5]");
  }
}

TEST_CASE("A rank outside the job is a protocol error", "[controller][readiness]") {
  ReadinessTable table(2);
  std::vector<ReadyTensor> ready;
  CHECK(table.Announce(2, Meta("x"), kT0, &ready).message() ==
        "rank 2 is out of range for a job of 2 ranks");
  CHECK(table.Announce(-1, Meta("x"), kT0, &ready).message() ==
        "rank -1 is out of range for a job of 2 ranks");
}

TEST_CASE("A shutdown fails the pending names the departed rank never announced",
          "[controller][readiness][shutdown]") {
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  REQUIRE(table.Announce(0, Meta("x"), kT0, &ready).ok());
  REQUIRE(table.Announce(2, Meta("y"), kT0, &ready).ok());
  REQUIRE(table.Announce(1, Meta("v"), kT0, &ready).ok());
  REQUIRE(table.Announce(1, Meta("x"), kT0, &ready).ok());
  table.MarkShutdown(2, &ready);
  REQUIRE(ready.size() == 2);
  CHECK(ready[0].error == "rank 2 called shutdown() before submitting 'x'");
  CHECK(ready[1].error == "rank 2 called shutdown() before submitting 'v'");
  CHECK(table.pending_count() == 1);
  CHECK(table.has_shut_down(2));
  CHECK(table.num_shut_down() == 1);
  // 'y', which rank 2 announced before leaving, still completes.
  ready.clear();
  REQUIRE(table.Announce(0, Meta("y"), kT0, &ready).ok());
  REQUIRE(table.Announce(1, Meta("y"), kT0, &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].meta.name == "y");
  CHECK(ready[0].error.empty());
  CHECK(table.pending_count() == 0);
}

TEST_CASE("A departed rank that leaves fails the names it had announced",
          "[controller][readiness][shutdown]") {
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  REQUIRE(table.Announce(2, Meta("g"), kT0, &ready).ok());
  table.MarkShutdown(2, &ready);
  CHECK(ready.empty());
  CHECK(table.pending_count() == 1);
  table.MarkGone(2, &ready);
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].meta.name == "g");
  CHECK(ready[0].error_code == StatusCode::kShutdown);
  CHECK_THAT(ready[0].error, Catch::Contains("rank 2 left the job") && Catch::Contains("'g'"));
  CHECK(table.pending_count() == 0);
}

TEST_CASE("After a shutdown, every new announcement fails at once",
          "[controller][readiness][shutdown]") {
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  table.MarkShutdown(1, &ready);
  CHECK(ready.empty());
  REQUIRE(table.Announce(0, Meta("z"), kT0, &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].error == "rank 1 called shutdown() before submitting 'z'");
  // A second shutdown keeps naming the first rank.
  table.MarkShutdown(2, &ready);
  table.MarkShutdown(2, &ready);  // idempotent
  CHECK(table.num_shut_down() == 2);
  REQUIRE(table.Announce(0, Meta("w"), kT0, &ready).ok());
  CHECK(ready.back().error == "rank 1 called shutdown() before submitting 'w'");
  CHECK(table.pending_count() == 0);
}

TEST_CASE("Announcing after one's own shutdown notice is a protocol error",
          "[controller][readiness][shutdown]") {
  ReadinessTable table(2);
  std::vector<ReadyTensor> ready;
  table.MarkShutdown(0, &ready);
  Status status = table.Announce(0, Meta("x"), kT0, &ready);
  CHECK(status.message() == "rank 0 announced 'x' after its shutdown notice");
  CHECK(ready.empty());
}

using Kind = NegotiationEvent::Kind;

NegotiationEvent Step(Kind kind, std::string name, int rank = -1, OpType op = OpType::kAllreduce) {
  return NegotiationEvent{kind, std::move(name), op, rank};
}

TEST_CASE("The table remembers when each pending name was first announced",
          "[controller][readiness][stall]") {
  using std::chrono::seconds;
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  CHECK_FALSE(table.oldest_first_seen().has_value());
  CHECK(table.WaitingSince(kT0 + seconds(100)).empty());
  REQUIRE(table.Announce(1, Meta("a"), kT0, &ready).ok());
  REQUIRE(table.Announce(0, Meta("b"), kT0 + seconds(5), &ready).ok());
  REQUIRE(table.Announce(2, Meta("a"), kT0 + seconds(7), &ready).ok());  // not a reset
  REQUIRE(table.Announce(2, Meta("c"), kT0 + seconds(9), &ready).ok());
  CHECK(table.oldest_first_seen() == kT0);

  std::vector<PendingName> waiting = table.WaitingSince(kT0 + seconds(5));  // inclusive
  REQUIRE(waiting.size() == 2);
  CHECK(waiting[0].name == "a");
  CHECK(waiting[0].first_seen == kT0);
  CHECK(waiting[0].missing == std::vector<int>{0});
  CHECK(waiting[1].name == "b");
  CHECK(waiting[1].missing == std::vector<int>{1, 2});
  CHECK(table.WaitingSince(kT0 - seconds(1)).empty());

  // Completing the oldest makes the next one the oldest; shutdowns and departures likewise.
  REQUIRE(table.Announce(0, Meta("a"), kT0 + seconds(10), &ready).ok());
  CHECK(table.oldest_first_seen() == kT0 + seconds(5));
  table.MarkShutdown(1, &ready);  // fails 'b' and 'c'
  CHECK_FALSE(table.oldest_first_seen().has_value());
  CHECK(table.WaitingSince(Clock::TimePoint::max()).empty());
}

TEST_CASE("Announcements report their negotiation steps in order",
          "[controller][readiness][trace]") {
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  std::vector<NegotiationEvent> events;
  REQUIRE(table.Announce(1, Meta("a"), kT0, &ready, &events).ok());
  REQUIRE(table.Announce(0, Meta("a", {5}), kT0, &ready, &events).ok());
  // A failed announcement reports nothing.
  CHECK_FALSE(table.Announce(0, Meta("a"), kT0, &ready, &events).ok());
  REQUIRE(table.Announce(2, Meta("a"), kT0, &ready, &events).ok());
  CHECK(events ==
        std::vector<NegotiationEvent>{Step(Kind::kBegin, "a"), Step(Kind::kAnnounce, "a", 1),
                                      Step(Kind::kAnnounce, "a", 0), Step(Kind::kAnnounce, "a", 2),
                                      Step(Kind::kEnd, "a", 2)});
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].is_error());  // a mismatch ends like a success: with the completing rank
}

TEST_CASE("Every step of a name carries its first announcement's op",
          "[controller][readiness][trace]") {
  ReadinessTable table(2);
  std::vector<ReadyTensor> ready;
  std::vector<NegotiationEvent> events;
  TensorMeta broadcast = Meta("x");
  broadcast.op = OpType::kBroadcast;
  broadcast.root = 0;
  REQUIRE(table.Announce(1, broadcast, kT0, &ready, &events).ok());
  REQUIRE(table.Announce(0, Meta("x"), kT0, &ready, &events).ok());
  CHECK(events == std::vector<NegotiationEvent>{Step(Kind::kBegin, "x", -1, OpType::kBroadcast),
                                                Step(Kind::kAnnounce, "x", 1, OpType::kBroadcast),
                                                Step(Kind::kAnnounce, "x", 0, OpType::kBroadcast),
                                                Step(Kind::kEnd, "x", 0, OpType::kBroadcast)});
}

TEST_CASE("Names failed by a shutdown or a departure end without a completing rank",
          "[controller][readiness][trace][shutdown]") {
  ReadinessTable table(3);
  std::vector<ReadyTensor> ready;
  std::vector<NegotiationEvent> events;
  REQUIRE(table.Announce(0, Meta("x"), kT0, &ready, &events).ok());
  REQUIRE(table.Announce(2, Meta("y"), kT0, &ready, &events).ok());
  events.clear();
  table.MarkShutdown(2, &ready, &events);  // 'x' fails; 'y' stays
  CHECK(events == std::vector<NegotiationEvent>{Step(Kind::kEnd, "x", -1)});
  events.clear();
  REQUIRE(table.Announce(1, Meta("z"), kT0, &ready, &events).ok());  // fails at once
  CHECK(events == std::vector<NegotiationEvent>{Step(Kind::kBegin, "z"),
                                                Step(Kind::kAnnounce, "z", 1),
                                                Step(Kind::kEnd, "z", -1)});
  events.clear();
  table.MarkGone(2, &ready, &events);
  CHECK(events == std::vector<NegotiationEvent>{Step(Kind::kEnd, "y", -1)});
  CHECK(table.pending_count() == 0);
}

}  // namespace
}  // namespace kolo::controller
