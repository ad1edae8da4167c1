// ControllerSession on its own, over an in-memory control channel the test fills and reads,
// under a manual clock: keepalives, clock pings, "controller lost" and the bounded wait for
// the controller's verdict, with no thread, socket or sleep.
#include "core/loop/controller_session.h"

#include <catch2/catch.hpp>
#include <vector>

#include "tests/support/memory_control_channel.h"

using namespace kolo;
using namespace std::chrono_literals;

namespace {

using MemoryChannel = testing::MemoryControlChannel;

ControllerMessage AbortMessage(const std::string& reason) {
  ControllerMessage m;
  m.kind = ControllerMessage::Kind::kAbort;
  m.reason = reason;
  return m;
}

}  // namespace

TEST_CASE("The session sends a keepalive once every quarter of the timeout", "[core][loop]") {
  ManualClock clock;
  MemoryChannel channel;
  ControllerSession session({/*timeout_seconds=*/2, nullptr}, &channel, &clock);
  session.KeepAlive();  // the first pass: none sent yet
  REQUIRE(channel.count(WorkerMessage::Kind::kPing) == 1);
  CHECK(channel.sent[0].ping_unix_us == 0);  // a keepalive, which the controller does not answer
  clock.Advance(499ms);
  session.KeepAlive();
  CHECK(channel.count(WorkerMessage::Kind::kPing) == 1);
  clock.Advance(1ms);
  session.KeepAlive();
  CHECK(channel.count(WorkerMessage::Kind::kPing) == 2);
  // Without clock sync configured, no clock ping goes out and a Pong asks for none.
  session.SendClockPing();
  CHECK(channel.count(WorkerMessage::Kind::kPing) == 2);
  CHECK_FALSE(session.TakePong(ControllerMessage{}));
}

TEST_CASE("Clock sync keeps the sample with the shortest round trip and takes five",
          "[core][loop]") {
  ManualClock clock;
  MemoryChannel channel;
  std::vector<std::pair<double, double>> told;  // (offset, rtt)
  ControllerSession session(
      {30, [&](double offset, double rtt) { told.emplace_back(offset, rtt); }}, &channel, &clock);
  session.SendClockPing();
  REQUIRE(channel.count(WorkerMessage::Kind::kPing) == 1);
  const int64_t sent_at = channel.sent[0].ping_unix_us;
  CHECK(sent_at > 0);
  ControllerMessage pong;
  pong.kind = ControllerMessage::Kind::kPong;
  // A pong from long ago (a round trip of ~1000 s) is kept first, being the only sample.
  pong.ping_unix_us = sent_at - 1'000'000'000;
  pong.controller_unix_us = sent_at;
  int due = 0;
  if (session.TakePong(pong)) ++due;
  REQUIRE(told.size() == 1);
  CHECK(told[0].second >= 1e9);
  // A shorter one replaces it; a longer one does not.
  pong.ping_unix_us = sent_at;
  if (session.TakePong(pong)) ++due;
  REQUIRE(told.size() == 2);
  CHECK(told[1].second < 1e9);
  pong.ping_unix_us = sent_at - 2'000'000'000;
  if (session.TakePong(pong)) ++due;
  CHECK(told.size() == 2);
  if (session.TakePong(pong)) ++due;
  CHECK(due == 4);
  CHECK_FALSE(session.TakePong(pong));  // the fifth sample is the last
}

TEST_CASE("A broken control stream is reported as the controller lost", "[core][loop]") {
  ManualClock clock;
  MemoryChannel channel;
  ControllerSession session({30, nullptr}, &channel, &clock);
  ControllerMessage shutdown;
  shutdown.kind = ControllerMessage::Kind::kShutdown;
  channel.inbox.push_back(shutdown);
  channel.Break(Unavailable("the stream ended"));
  // What arrived before the break is still read, then the break.
  StatusOr<std::optional<ControllerMessage>> first = session.TryReceive();
  REQUIRE(first.ok());
  REQUIRE(first->has_value());
  CHECK((*first)->kind == ControllerMessage::Kind::kShutdown);
  StatusOr<std::optional<ControllerMessage>> second = session.TryReceive();
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == StatusCode::kUnavailable);
  CHECK(second.status().message() == "controller lost: the stream ended");
  const Status notice = session.SendStopNotice();
  CHECK(notice.message() == "controller lost: the stream ended");
  session.SendAbortNotice(Internal("x"));  // best effort: nothing to report
  CHECK(channel.sent.empty());
}

TEST_CASE("The root cause of a failed collective is the controller's Abort when it comes in time",
          "[core][loop]") {
  ManualClock clock;
  MemoryChannel channel;
  ControllerSession session({30, nullptr}, &channel, &clock);
  const Status local = Unavailable("allreduce 'w': rank 1 closed the connection");
  int waits = 0;
  // The verdict comes after two waits; the responses before it are dropped.
  ControllerMessage responses;
  responses.kind = ControllerMessage::Kind::kResponses;
  channel.inbox.push_back(responses);
  const Clock::TimePoint start = clock.Now();
  const Status cause = session.RootCause(local, [&](Clock::TimePoint until) {
    CHECK(until == start + 1s);  // min(T/4, 1 s) after a closed connection
    clock.Advance(100ms);
    if (++waits == 2) channel.inbox.push_back(AbortMessage("rank 2 lost: it was killed"));
  });
  CHECK(waits == 2);
  CHECK(cause.code() == StatusCode::kAborted);
  CHECK(cause.message() == "rank 2 lost: it was killed");
}

TEST_CASE("Without a verdict the failed collective's own error stands, after a bounded wait",
          "[core][loop]") {
  ManualClock clock;
  MemoryChannel channel;
  const double timeout = GENERATE(2.0, 30.0);
  ControllerSession session({timeout, nullptr}, &channel, &clock);
  const Clock::TimePoint start = clock.Now();
  auto wait = [&](Clock::TimePoint until) { clock.Advance(until - clock.Now()); };
  // A closed connection: min(T/4, 1 s).
  const Status closed = Unavailable("allreduce 'w': rank 1 closed the connection");
  CHECK(session.RootCause(closed, wait) == closed);
  CHECK(clock.Now() - start == DurationOf(std::min(timeout / 4, 1.0)));
  // A timed-out exchange: 3T/4, since the silent peer may itself wait for a stopped rank, which
  // the keepalive names up to T/4 later.
  const Clock::TimePoint second = clock.Now();
  const Status late = DeadlineExceeded("allreduce 'w': timed out after 30 s");
  CHECK(session.RootCause(late, wait) == late);
  CHECK(clock.Now() - second == DurationOf(timeout * 3 / 4));
  // The stream breaking meanwhile: the controller lost.
  channel.Break(Unavailable("the stream ended"));
  CHECK(session.RootCause(closed, wait).message() == "controller lost: the stream ended");
}
