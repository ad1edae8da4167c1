#include "controller/stall_inspector.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <initializer_list>
#include <string>
#include <vector>

#include "controller/readiness_table.h"
#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using namespace std::chrono_literals;
using testing::kT0;
using testing::Meta;

// A readiness table that the test fills with announcements at chosen times.
struct Table {
  explicit Table(int size) : table(size) {}
  void Announce(std::initializer_list<int> ranks, std::initializer_list<const char*> names,
                Clock::TimePoint at) {
    for (int rank : ranks) {
      for (const char* name : names) REQUIRE(table.Announce(rank, Meta(name), at, &ready).ok());
    }
  }
  ReadinessTable table;
  std::vector<ReadyTensor> ready;
};

StallInspector::Config Seconds(double check, double shutdown) {
  return StallInspector::Config{check, shutdown};
}

TEST_CASE("A stall warning names each missing rank, its oldest names and how long they waited",
          "[controller][stall]") {
  Table t(4);
  t.Announce({0, 1}, {"grad/w1", "grad/w2", "grad/w3", "grad/w4", "grad/w5"}, kT0);
  t.Announce({3}, {"grad/w2", "grad/w3", "grad/w4", "grad/w5"}, kT0);
  t.Announce({0}, {"grad/late"}, kT0 + 30s);  // waited less than the check time: not listed
  StallInspector inspector(Seconds(60, 0));
  CHECK(inspector.enabled());
  CHECK(inspector.NextCheck(t.table) == kT0 + 60s);

  StallInspector::Findings early = inspector.Inspect(t.table, kT0 + 59s);
  CHECK(early.warning.empty());
  CHECK(early.abort_reason.empty());

  StallInspector::Findings found = inspector.Inspect(t.table, kT0 + 61s);
  CHECK(found.warning ==
        "stall: some ranks have not submitted tensors that others submitted 60 s or more ago "
        "(KOLO_STALL_CHECK_SECONDS): rank 2 has not submitted 'grad/w1', 'grad/w2', 'grad/w3' "
        "and 2 more (waiting 61 s); rank 3 has not submitted 'grad/w1' (waiting 61 s)");
  CHECK(found.abort_reason.empty());
}

TEST_CASE("Ranks missing the same names share one clause, runs written as ranges",
          "[controller][stall]") {
  Table t(9);
  t.Announce({0, 1, 4}, {"x"}, kT0);
  t.Announce({0, 1, 2, 3, 4, 5, 6, 7}, {"y"}, kT0 + 500ms);
  StallInspector inspector(Seconds(0.5, 0));
  CHECK(inspector.Inspect(t.table, kT0 + 1s).warning ==
        "stall: some ranks have not submitted tensors that others submitted 0.5 s or more ago "
        "(KOLO_STALL_CHECK_SECONDS): ranks 2, 3, 5-7 have not submitted 'x' (waiting 1 s); "
        "rank 8 has not submitted 'x', 'y' (waiting 1 s)");
}

TEST_CASE("Past eight clauses the warning counts the remaining ranks", "[controller][stall]") {
  Table t(12);
  for (int missing = 1; missing < 12; ++missing) {
    const std::string name = "n" + std::to_string(missing);
    for (int rank = 0; rank < 12; ++rank) {
      if (rank != missing) REQUIRE(t.table.Announce(rank, Meta(name), kT0, &t.ready).ok());
    }
  }
  StallInspector inspector(Seconds(60, 0));
  const std::string warning = inspector.Inspect(t.table, kT0 + 60s).warning;
  CHECK_THAT(warning, Catch::EndsWith("; rank 8 has not submitted 'n8' (waiting 60 s); and 3 "
                                      "more ranks"));
  CHECK_THAT(warning, Catch::Contains("(KOLO_STALL_CHECK_SECONDS): rank 1 has not submitted "
                                      "'n1' (waiting 60 s); rank 2 has not submitted 'n2'"));
}

TEST_CASE("A stall warns once per check period, not at every step", "[controller][stall]") {
  Table t(2);
  t.Announce({0}, {"a"}, kT0);
  StallInspector inspector(Seconds(60, 0));
  std::vector<std::string> warnings;
  // A sequencer that wakes every 100 ms for two and a half minutes.
  for (auto now = kT0; now <= kT0 + 150s; now += 100ms) {
    StallInspector::Findings found = inspector.Inspect(t.table, now);
    if (!found.warning.empty()) warnings.push_back(found.warning);
    if (now == kT0 + 60s) CHECK(inspector.NextCheck(t.table) == kT0 + 120s);
  }
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[0], Catch::EndsWith("rank 1 has not submitted 'a' (waiting 60 s)"));
  CHECK_THAT(warnings[1], Catch::EndsWith("rank 1 has not submitted 'a' (waiting 120 s)"));

  // The stall ends; nothing pending needs no timer. A new stall warns once old enough.
  t.Announce({1}, {"a"}, kT0 + 150s);
  CHECK_FALSE(inspector.NextCheck(t.table).has_value());
  t.Announce({1}, {"b"}, kT0 + 170s);
  t.Announce({1}, {"c"}, kT0 + 175s);
  CHECK(inspector.NextCheck(t.table) == kT0 + 230s);
  CHECK(inspector.Inspect(t.table, kT0 + 229s).warning.empty());
  CHECK_THAT(inspector.Inspect(t.table, kT0 + 230s).warning,
             Catch::EndsWith("): rank 0 has not submitted 'b' (waiting 60 s)"));  // not 'c' yet

  // 'c' turns 60 s old at 235 s, just after that warning: it waits for the next period.
  t.Announce({0}, {"b"}, kT0 + 231s);
  CHECK(inspector.NextCheck(t.table) == kT0 + 290s);
  CHECK(inspector.Inspect(t.table, kT0 + 235s).warning.empty());
  CHECK_THAT(inspector.Inspect(t.table, kT0 + 290s).warning,
             Catch::EndsWith("): rank 0 has not submitted 'c' (waiting 115 s)"));
}

TEST_CASE("A stall past the shutdown time aborts, naming the ranks and the variable",
          "[controller][stall]") {
  Table t(4);
  t.Announce({0, 1}, {"grad/w1", "grad/w2"}, kT0);
  t.Announce({3}, {"grad/w2"}, kT0);
  t.Announce({0}, {"grad/w3"}, kT0 + 1s);  // has waited less than 30 s at the abort
  StallInspector inspector(Seconds(10, 30));
  CHECK(inspector.NextCheck(t.table) == kT0 + 10s);

  const std::string warning = inspector.Inspect(t.table, kT0 + 10s).warning;
  CHECK_THAT(warning, Catch::EndsWith("rank 3 has not submitted 'grad/w1' (waiting 10 s); the job "
                                      "aborts once a tensor has waited 30 s "
                                      "(KOLO_STALL_SHUTDOWN_SECONDS)"));
  CHECK(inspector.NextCheck(t.table) == kT0 + 20s);
  CHECK_FALSE(inspector.Inspect(t.table, kT0 + 20s).warning.empty());
  CHECK(inspector.NextCheck(t.table) == kT0 + 30s);  // the abort is due with the next warning

  CHECK(inspector.Inspect(t.table, kT0 + 30s - 1ns).abort_reason.empty());
  StallInspector::Findings found = inspector.Inspect(t.table, kT0 + 30s);
  CHECK(found.abort_reason ==
        "stalled for 30 s (KOLO_STALL_SHUTDOWN_SECONDS): rank 2 never submitted 'grad/w1', "
        "'grad/w2'; rank 3 never submitted 'grad/w1'");
  CHECK(found.warning.empty());  // the abort replaces a warning due at the same step
}

TEST_CASE("Shutdown works without warnings, and zero disables both", "[controller][stall]") {
  Table t(2);
  t.Announce({1}, {"x"}, kT0);
  SECTION("shutdown only") {
    StallInspector inspector(Seconds(0, 5));
    CHECK(inspector.NextCheck(t.table) == kT0 + 5s);
    CHECK(inspector.Inspect(t.table, kT0 + 4s).warning.empty());
    CHECK(inspector.Inspect(t.table, kT0 + 5s).abort_reason ==
          "stalled for 5 s (KOLO_STALL_SHUTDOWN_SECONDS): rank 0 never submitted 'x'");
  }
  SECTION("both off") {
    StallInspector inspector(Seconds(0, 0));
    CHECK_FALSE(inspector.enabled());
    CHECK_FALSE(inspector.NextCheck(t.table).has_value());
    StallInspector::Findings found = inspector.Inspect(t.table, kT0 + 1'000'000s);
    CHECK(found.warning.empty());
    CHECK(found.abort_reason.empty());
  }
}

TEST_CASE("Nothing pending needs no check", "[controller][stall]") {
  Table t(3);
  StallInspector inspector(Seconds(60, 300));
  CHECK_FALSE(inspector.NextCheck(t.table).has_value());
  t.Announce({0, 1, 2}, {"done"}, kT0);
  CHECK_FALSE(inspector.NextCheck(t.table).has_value());
  StallInspector::Findings found = inspector.Inspect(t.table, kT0 + 1000s);
  CHECK(found.warning.empty());
  CHECK(found.abort_reason.empty());
}

TEST_CASE("The pending text lists every pending name, however short its wait",
          "[controller][stall]") {
  // What the controller adds to an abort a rank asked for (a timed-out wait), whatever the
  // stall settings: the names pending at that moment and the ranks that had not sent them.
  Table t(4);
  CHECK(PendingText({{&t.table, nullptr}}, kT0) == "");
  t.Announce({0, 1, 3}, {"a"}, kT0);
  t.Announce({0}, {"b"}, kT0 + 1500ms);
  t.Announce({0, 1, 2, 3}, {"done"}, kT0);
  CHECK(PendingText({{&t.table, nullptr}}, kT0 + 2s) ==
        "ranks 1, 3 have not submitted 'b' (waiting 0.5 s); rank 2 has not submitted 'a', 'b' "
        "(waiting 2 s)");
  // A process set's table names job ranks.
  const std::vector<int> members = {5, 7};
  Table set(2);
  set.Announce({1}, {"s"}, kT0);
  CHECK(PendingText({{&set.table, &members}}, kT0 + 1s) ==
        "rank 5 has not submitted 's' (waiting 1 s)");
}

}  // namespace
}  // namespace kolo::controller
