// Tests of LocalControlChannel, rank 0's in-process control channel: it calls a
// ControllerHandler on the caller's thread and is that handler's outbox, keeping rank 0's
// messages and passing the other ranks' on. The handler here welcomes once `size` ranks said
// hello and records every call; the remote outbox records what it was given, in order.
#include "transport/local/local_control_channel.h"

#include <catch2/catch.hpp>
#include <thread>
#include <utility>
#include <vector>

namespace kolo {
namespace {

using namespace std::chrono_literals;

struct Log {
  std::vector<std::string> events;  // "remote:<rank>:<kind>", "local:<kind>", "closed:<status>"
};

class RecordingRemote final : public ControllerOutbox {
 public:
  explicit RecordingRemote(Log* log) : log_(log) {}
  void Send(int rank, const ControllerMessage& message) override {
    log_->events.push_back("remote:" + std::to_string(rank) + ":" + KindName(message.kind));
  }

 private:
  Log* log_;
};

// Admits hellos, refuses rank 5, welcomes when `size` ranks said hello; answers a request
// message with a Responses message to everyone.
class TestHandler final : public ControllerHandler {
 public:
  TestHandler(int size, Log* log) : size_(size), log_(log) {}
  void set_outbox(ControllerOutbox* outbox) { outbox_ = outbox; }
  Status OnHello(const Hello& hello) override {
    if (hello.rank == 5) return FailedPrecondition("rank 5 is not wanted");
    if (++hellos_ == size_) {
      ControllerMessage welcome;
      welcome.kind = ControllerMessage::Kind::kWelcome;
      for (int r = 0; r < size_; ++r) welcome.peers.push_back({r, "host", "addr"});
      outbox_->SendToAll(size_, welcome);
    }
    return Status::Ok();
  }
  void OnMessage(int rank, const WorkerMessage& message) override {
    messages.emplace_back(rank, message.kind);
    if (message.kind == WorkerMessage::Kind::kRequests) {
      ControllerMessage responses;
      responses.kind = ControllerMessage::Kind::kResponses;
      outbox_->SendToAll(size_, responses);
    }
  }
  void OnStreamClosed(int rank, const Status& why) override {
    log_->events.push_back("closed:" + std::to_string(rank) + ":" + why.ToString());
  }
  std::vector<std::pair<int, WorkerMessage::Kind>> messages;

 private:
  const int size_;
  Log* const log_;
  ControllerOutbox* outbox_ = nullptr;
  int hellos_ = 0;
};

struct Fixture {
  explicit Fixture(int size)
      : remote(&log), handler(size, &log), channel(0, &handler, &remote, "gen-1") {
    handler.set_outbox(&channel);
  }
  Log log;
  RecordingRemote remote;
  TestHandler handler;
  LocalControlChannel channel;
};

Hello HelloOf(int rank, int size) {
  return {rank, size, "host", "addr"};
}

std::chrono::steady_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}

TEST_CASE("Rank 0's hello reaches the controller and its Welcome comes back in process",
          "[core][control]") {
  Fixture f(2);
  f.handler.OnHello(HelloOf(1, 2)).IgnoreError();  // rank 1's hello came over the network
  int wakes = 0;
  auto peers = f.channel.Connect(HelloOf(0, 2), In(5s), [&] { ++wakes; });
  REQUIRE(peers.ok());
  CHECK(peers->size() == 2);
  CHECK(wakes == 1);
  CHECK(f.channel.generation() == "gen-1");
  // Rank 1's copy of the Welcome went to the remote outbox; rank 0's stayed here.
  CHECK(f.log.events == std::vector<std::string>{"remote:1:welcome"});
}

TEST_CASE("Rank 0's messages run the handler on the caller's thread; answers are queued",
          "[core][control]") {
  Fixture f(3);
  f.handler.OnHello(HelloOf(1, 3)).IgnoreError();
  f.handler.OnHello(HelloOf(2, 3)).IgnoreError();
  REQUIRE(f.channel.Connect(HelloOf(0, 3), In(5s), [] {}).ok());
  f.log.events.clear();
  WorkerMessage requests;
  requests.kind = WorkerMessage::Kind::kRequests;
  REQUIRE(f.channel.Send(requests).ok());
  REQUIRE(f.handler.messages.size() == 1);  // synchronously
  CHECK(f.handler.messages[0] == std::make_pair(0, WorkerMessage::Kind::kRequests));
  // Every other rank's copy is handed on before rank 0's lands in its queue.
  CHECK(f.log.events == std::vector<std::string>{"remote:1:responses", "remote:2:responses"});
  auto got = f.channel.TryReceive();
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK((*got)->kind == ControllerMessage::Kind::kResponses);
  got = f.channel.TryReceive();
  REQUIRE(got.ok());
  CHECK_FALSE(got->has_value());
}

TEST_CASE("An Abort for rank 0 interrupts it through the fatal handler, until Shutdown",
          "[core][control]") {
  Fixture f(1);
  std::vector<std::string> fatal;
  f.channel.SetFatalHandler([&](const Status& why) { fatal.push_back(why.ToString()); });
  REQUIRE(f.channel.Connect(HelloOf(0, 1), In(5s), [] {}).ok());
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = "rank 3 lost";
  f.channel.Send(0, abort);
  REQUIRE(fatal.size() == 1);
  CHECK(fatal[0] == "ABORTED: rank 3 lost");
  ControllerMessage shutdown;
  shutdown.kind = ControllerMessage::Kind::kShutdown;
  f.channel.Send(0, shutdown);
  f.channel.Send(0, abort);
  CHECK(fatal.size() == 1);  // the job already ended
}

TEST_CASE("Closing tells the controller whether rank 0 sent its shutdown notice",
          "[core][control]") {
  const bool notice = GENERATE(true, false);
  Fixture f(1);
  REQUIRE(f.channel.Connect(HelloOf(0, 1), In(5s), [] {}).ok());
  f.log.events.clear();
  if (notice) {
    WorkerMessage shutdown;
    shutdown.kind = WorkerMessage::Kind::kShutdown;
    REQUIRE(f.channel.Send(shutdown).ok());
  }
  f.channel.Close(In(1s));
  f.channel.Close(In(1s));  // idempotent
  REQUIRE(f.log.events.size() == 1);
  if (notice) {
    CHECK(f.log.events[0] == "closed:0:OK");
  } else {
    CHECK(f.log.events[0] ==
          "closed:0:UNAVAILABLE: rank 0 left without a shutdown notice (its runtime was torn "
          "down after an error)");
  }
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  CHECK(f.channel.Send(ping).message() == "the local control channel is closed");
}

TEST_CASE("Connect fails with the controller's refusal, or at its deadline", "[core][control]") {
  SECTION("refused") {
    Log log;
    RecordingRemote remote(&log);
    TestHandler handler(6, &log);
    LocalControlChannel channel(5, &handler, &remote, "g");
    handler.set_outbox(&channel);
    auto peers = channel.Connect(HelloOf(5, 6), In(5s), [] {});
    CHECK(peers.status().ToString() ==
          "ABORTED: the controller in this process refused rank 5: rank 5 is not wanted");
  }
  SECTION("no Welcome") {
    Fixture f(2);  // rank 1 never says hello
    const auto start = std::chrono::steady_clock::now();
    auto peers = f.channel.Connect(HelloOf(0, 2), In(200ms), [] {});
    CHECK(peers.status().code() == StatusCode::kDeadlineExceeded);
    CHECK_THAT(peers.status().message(), Catch::Contains("rank 0: no Welcome"));
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  SECTION("an Abort instead of the Welcome") {
    Fixture f(2);
    ControllerMessage abort;
    abort.kind = ControllerMessage::Kind::kAbort;
    abort.reason = "rank 1 never connected within 1 s (KOLO_START_TIMEOUT_SECONDS)";
    std::thread later([&] {
      std::this_thread::sleep_for(50ms);
      f.channel.SendToAll(2, abort);
    });
    auto peers = f.channel.Connect(HelloOf(0, 2), In(5s), [] {});
    later.join();
    CHECK(peers.status().ToString() ==
          "ABORTED: the controller in this process refused rank 0: rank 1 never connected within "
          "1 s (KOLO_START_TIMEOUT_SECONDS)");
  }
}

}  // namespace
}  // namespace kolo
