// Tests of the control plane over real gRPC on 127.0.0.1: GrpcControlServer with a recording
// ControllerHandler, and GrpcControlChannel workers on threads. Every test arms a Watchdog.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "tests/support/seconds_since.h"
#include "tests/support/watchdog.h"
#include "tests/transport/control_test_handler.h"
#include "tests/transport/control_test_support.h"
#include "transport/grpc/grpc_control_channel.h"
#include "transport/grpc/grpc_control_server.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using kolo::testing::Watchdog;
using testing::Diff;
using testing::Recorded;
using testing::RecordingHandler;
using testing::Waker;

constexpr double kTimeoutSeconds = 5;

std::chrono::steady_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}
using kolo::testing::SecondsSince;

Hello MakeHello(int rank, int size, const std::string& host = "host") {
  return {rank, size, host, "127.0.0.1:" + std::to_string(7000 + rank),
          "boot-id/" + std::to_string(rank)};
}

// A loopback port that nothing listens on (it was free a moment ago).
int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

struct Controller {
  Controller(size_t ranks_to_welcome, const std::string& address = "127.0.0.1:0")
      : handler(ranks_to_welcome) {
    auto started = GrpcControlServer::Start(address, &handler, kTimeoutSeconds, nullptr);
    REQUIRE(started.ok());
    server = std::move(started).value();
    handler.set_outbox(server.get());
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server->port()); }
  RecordingHandler handler;
  std::unique_ptr<GrpcControlServer> server;
};

std::unique_ptr<GrpcControlChannel> NewChannel(const std::string& address) {
  return GrpcControlChannel::Create(address, kTimeoutSeconds, nullptr);
}

void ShutDownCleanly(GrpcControlChannel& channel) {
  WorkerMessage notice;
  notice.kind = WorkerMessage::Kind::kShutdown;
  REQUIRE(channel.Send(notice).ok());
  channel.Close(In(5s));
}

TEST_CASE("Three workers say hello, get the peer table and shut down cleanly",
          "[transport][grpc]") {
  Watchdog watchdog("hello/welcome", 20s);
  Controller controller(3);
  std::vector<std::unique_ptr<GrpcControlChannel>> channels;
  for (int r = 0; r < 3; ++r) channels.push_back(NewChannel(controller.address()));
  std::vector<StatusOr<std::vector<PeerInfo>>> peers(3, Status(Internal("not run")));
  std::vector<std::thread> workers;
  for (int r = 0; r < 3; ++r) {
    workers.emplace_back([&, r] { peers[r] = channels[r]->Connect(MakeHello(r, 3), In(10s), {}); });
  }
  for (auto& w : workers) w.join();
  for (int r = 0; r < 3; ++r) {
    REQUIRE(peers[r].status().ToString() == "OK");
    REQUIRE(peers[r]->size() == 3);
    for (int j = 0; j < 3; ++j) {
      CHECK((*peers[r])[j].rank == j);
      CHECK((*peers[r])[j].data_address == MakeHello(j, 3).data_address);
      CHECK((*peers[r])[j].machine == MakeHello(j, 3).machine);
    }
  }
  for (auto& channel : channels) ShutDownCleanly(*channel);
  Recorded recorded =
      controller.handler.WaitUntil([](const Recorded& r) { return r.closed.size() == 3; }, 5s);
  REQUIRE(recorded.closed.size() == 3);
  for (const auto& [rank, status] : recorded.closed) CHECK(status.ToString() == "OK");
}

TEST_CASE("Requests and responses cross the stream unchanged", "[transport][grpc]") {
  Watchdog watchdog("round trip", 20s);
  Controller controller(1);
  auto channel = NewChannel(controller.address());
  Waker waker;
  Hello hello = testing::SampleHello(2);
  REQUIRE(channel->Connect(hello, In(10s), waker.Function()).ok());
  REQUIRE(channel->Send(testing::SampleRequests()).ok());
  Recorded recorded =
      controller.handler.WaitUntil([](const Recorded& r) { return !r.messages.empty(); }, 5s);
  REQUIRE(recorded.messages.size() == 1);
  CHECK(recorded.messages[0].first == 2);
  CHECK(Diff(recorded.messages[0].second, testing::SampleRequests()) == "");
  CHECK(Diff(recorded.hellos.at(2), hello) == "");

  controller.server->Send(7, testing::SampleResponses());  // no such stream: dropped, logged
  controller.server->Send(2, testing::SampleResponses());
  auto received = waker.Receive(*channel, 5s);
  REQUIRE(received.ok());
  REQUIRE(received->has_value());
  CHECK(Diff(**received, testing::SampleResponses()) == "");
  ShutDownCleanly(*channel);
}

TEST_CASE("One broadcast reaches every stream but the skipped rank, unchanged",
          "[transport][grpc]") {
  Watchdog watchdog("broadcast", 20s);
  Controller controller(3);
  std::vector<std::unique_ptr<GrpcControlChannel>> channels;
  std::vector<Waker> wakers(3);
  for (int r = 0; r < 3; ++r) channels.push_back(NewChannel(controller.address()));
  std::vector<Status> joined(3);
  std::vector<std::thread> workers;
  for (int r = 0; r < 3; ++r) {
    workers.emplace_back([&, r] {
      joined[r] = channels[r]->Connect(MakeHello(r, 3), In(10s), wakers[r].Function()).status();
    });
  }
  for (auto& w : workers) w.join();
  for (const Status& status : joined) REQUIRE(status.ToString() == "OK");
  // Rank 3 has no stream (dropped, logged); rank 1 is skipped.
  controller.server->SendToEach(4, /*skip=*/1, testing::SampleResponses());
  ControllerMessage pong;
  pong.kind = ControllerMessage::Kind::kPong;
  pong.ping_unix_us = 42;
  controller.server->Send(1, pong);
  for (int r : {0, 2}) {
    auto received = wakers[r].Receive(*channels[r], 5s);
    REQUIRE(received.ok());
    REQUIRE(received->has_value());
    CHECK(Diff(**received, testing::SampleResponses()) == "");
  }
  // Rank 1's first message after the Welcome is the Pong: no copy of the broadcast before it.
  auto received = wakers[1].Receive(*channels[1], 5s);
  REQUIRE(received.ok());
  REQUIRE(received->has_value());
  CHECK((*received)->kind == ControllerMessage::Kind::kPong);
  CHECK((*received)->ping_unix_us == 42);
  for (auto& channel : channels) ShutDownCleanly(*channel);
}

TEST_CASE("A refused hello fails Connect with the handler's reason", "[transport][grpc]") {
  Watchdog watchdog("refused hello", 20s);
  Controller controller(2);
  auto channel = NewChannel(controller.address());
  auto peers = channel->Connect(MakeHello(1, 2, "refused-host"), In(10s), {});
  CHECK(peers.status().code() == StatusCode::kAborted);
  CHECK(peers.status().message() == "the controller at " + controller.address() +
                                        " refused rank 1: rank 1 is on a refused host");
  CHECK(controller.handler.WaitUntil([](const Recorded&) { return false; }, 0ms).closed.empty());
}

TEST_CASE("A hello turned away for now is retried until the deadline, which names why",
          "[transport][grpc]") {
  Watchdog watchdog("hello turned away for now", 20s);
  Controller controller(2);
  auto channel = NewChannel(controller.address());
  const auto start = std::chrono::steady_clock::now();
  auto peers = channel->Connect(MakeHello(1, 2, RecordingHandler::kBusyHost), In(700ms), {});
  const double seconds = SecondsSince(start);
  CHECK(peers.status().code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(peers.status().message(),
             Catch::StartsWith("rank 1 could not join the controller (rank 0) at " +
                               controller.address()) &&
                 Catch::Contains("attempts); the last: ") &&
                 Catch::EndsWith("UNAVAILABLE: the controller turned rank 1 away for now: rank 1 "
                                 "is on a busy host"));
  CHECK(seconds >= 0.45);  // 0.7 s, less the last pause (at most 250 ms) that would overrun it
  CHECK(seconds < 1.4);
}

TEST_CASE("A worker turned away by a stopping controller joins the next one on its port",
          "[transport][grpc]") {
  Watchdog watchdog("stopping controller, then a new one", 30s);
  auto old_controller = std::make_unique<Controller>(1);
  const std::string address = old_controller->address();
  auto staying = NewChannel(address);
  REQUIRE(staying->Connect(MakeHello(0, 1), In(10s), {}).ok());
  // The old controller stops, waiting up to 1 s for rank 0's stream, which stays open; a
  // worker of the next job says hello meanwhile: it is turned away (the controller is
  // stopping) or, if it came first, cancelled with the old streams. Either way it keeps
  // trying, and joins the next controller once that listens on the same port.
  std::thread stopper([&] { old_controller->server->Stop(In(1s)); });
  auto next_worker = NewChannel(address);
  StatusOr<std::vector<PeerInfo>> peers = Status(Internal("not run"));
  std::thread worker([&] { peers = next_worker->Connect(MakeHello(1, 2), In(10s), {}); });
  stopper.join();
  old_controller.reset();
  Controller next_controller(2, address);
  auto rank0 = NewChannel(address);
  REQUIRE(rank0->Connect(MakeHello(0, 2), In(10s), {}).ok());
  worker.join();
  REQUIRE(peers.status().ToString() == "OK");
  CHECK(peers->size() == 2);
  ShutDownCleanly(*next_worker);
  ShutDownCleanly(*rank0);
}

TEST_CASE("A second stream for the same rank is refused", "[transport][grpc]") {
  Watchdog watchdog("duplicate rank", 20s);
  Controller controller(2);
  auto first = NewChannel(controller.address());
  StatusOr<std::vector<PeerInfo>> first_result = Status(Internal("not run"));
  std::thread worker([&] { first_result = first->Connect(MakeHello(0, 2), In(1500ms), {}); });
  controller.handler.WaitUntil([](const Recorded& r) { return r.hellos.count(0) == 1; }, 5s);
  auto second = NewChannel(controller.address());
  auto refused = second->Connect(MakeHello(0, 2), In(10s), {});
  worker.join();
  CHECK_THAT(refused.status().message(), Catch::EndsWith("rank 0 already has a control stream"));
  CHECK(first_result.status().code() == StatusCode::kDeadlineExceeded);  // no rank 1: no welcome
}

TEST_CASE("A stopped controller is a lost stream, after the queued messages", "[transport][grpc]") {
  Watchdog watchdog("controller stopped", 20s);
  Controller controller(1);
  auto channel = NewChannel(controller.address());
  Waker waker;
  REQUIRE(channel->Connect(MakeHello(0, 1), In(10s), waker.Function()).ok());
  controller.server->Send(0, testing::SampleResponses());
  const auto start = std::chrono::steady_clock::now();
  controller.server->Stop(In(1s));
  auto queued = waker.Receive(*channel, 5s);
  REQUIRE(queued.ok());
  REQUIRE(queued->has_value());
  CHECK(Diff(**queued, testing::SampleResponses()) == "");
  auto lost = waker.Receive(*channel, 5s);
  CHECK(lost.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(lost.status().message(),
             Catch::StartsWith("lost the control stream to the controller (rank 0) at " +
                               controller.address() + ": "));
  CHECK(SecondsSince(start) < 2.0);  // bound: the 1 s stop deadline, asserted with a 2x margin
  CHECK_FALSE(channel->Send(testing::SampleRequests()).ok());
  Recorded recorded = controller.handler.WaitUntil([](const Recorded&) { return true; }, 0ms);
  REQUIRE(recorded.closed.count(0) == 1);
  CHECK(recorded.closed[0].message() ==
        "control stream of rank 0 was cancelled: the controller is stopping");
}

TEST_CASE("A worker that leaves without a shutdown notice is reported by rank",
          "[transport][grpc]") {
  const bool graceful = GENERATE(true, false);
  Watchdog watchdog("no shutdown notice", 20s);
  Controller controller(1);
  auto channel = NewChannel(controller.address());
  REQUIRE(channel->Connect(MakeHello(2, 4), In(10s), {}).ok());
  const auto start = std::chrono::steady_clock::now();
  if (graceful) {
    channel->Close(In(5s));  // half-close, no notice
  } else {
    channel.reset();  // cancels the stream at once
  }
  Recorded recorded =
      controller.handler.WaitUntil([](const Recorded& r) { return r.closed.count(2) == 1; }, 5s);
  REQUIRE(recorded.closed.count(2) == 1);
  CHECK(recorded.closed[2].code() == StatusCode::kUnavailable);
  CHECK(recorded.closed[2].message() ==
        "control stream of rank 2 closed without shutdown (process died or network lost)");
  CHECK(SecondsSince(start) < 2.0);
}

TEST_CASE("Connect waits for a controller that starts later", "[transport][grpc]") {
  Watchdog watchdog("late controller", 20s);
  const std::string address = "127.0.0.1:" + std::to_string(UnusedPort());
  auto channel = NewChannel(address);
  StatusOr<std::vector<PeerInfo>> peers = Status(Internal("not run"));
  std::thread worker([&] { peers = channel->Connect(MakeHello(0, 1), In(10s), {}); });
  Controller controller(1, address);
  worker.join();
  CHECK(peers.status().ToString() == "OK");
  ShutDownCleanly(*channel);
}

TEST_CASE("Connect without a controller fails by its deadline", "[transport][grpc]") {
  Watchdog watchdog("no controller", 20s);
  const std::string address = "127.0.0.1:" + std::to_string(UnusedPort());
  auto channel = NewChannel(address);
  const auto start = std::chrono::steady_clock::now();
  auto peers = channel->Connect(MakeHello(3, 4), In(500ms), {});
  CHECK(peers.status().code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(peers.status().message(),
             Catch::StartsWith("rank 3 could not reach the controller (rank 0) at " + address));
  CHECK(SecondsSince(start) < 1.0);
}

}  // namespace
}  // namespace kolo::transport
