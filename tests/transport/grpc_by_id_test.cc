// Tests of responses by cache id over real gRPC on 127.0.0.1 (protocol 7, docs/PROTOCOL.md
// "Cached ops by bit vector"): the controller's server sends a broadcast response by id only
// once every stream was told its names, a stream that joins later makes it tell them again,
// workers' channels put the names back, and request batches of cache ids reach the handler
// whole. A raw gRPC stream shows what is on the wire. Every test arms a Watchdog.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <thread>

#include "proto/kolo.grpc.pb.h"
#include "tests/support/watchdog.h"
#include "tests/transport/control_test_handler.h"
#include "tests/transport/control_test_support.h"
#include "transport/auth/hmac_auth.h"
#include "transport/grpc/control_auth.h"
#include "transport/grpc/grpc_control_channel.h"
#include "transport/grpc/grpc_control_server.h"
#include "transport/grpc/wire_convert.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using kolo::testing::Watchdog;
using testing::Diff;
using testing::RecordingHandler;
using testing::Waker;

constexpr double kTimeoutSeconds = 5;

Hello MakeHello(int rank, int size) {
  return {rank, size, "host", "127.0.0.1:" + std::to_string(7000 + rank)};
}

struct Controller {
  explicit Controller(size_t ranks) : handler(ranks) {
    auto started = GrpcControlServer::Start("127.0.0.1:0", &handler, kTimeoutSeconds, nullptr);
    REQUIRE(started.ok());
    server = std::move(started).value();
    handler.set_outbox(server.get());
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server->port()); }
  RecordingHandler handler;
  std::unique_ptr<GrpcControlServer> server;
};

// A worker stream driven by hand (no job secret, as the server above has none), to read the
// controller's messages as they are on the wire.
struct RawWorker {
  RawWorker(const std::string& address, const Hello& hello)
      : channel(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        stub(wire::Controller::NewStub(channel)) {
    context.set_deadline(std::chrono::system_clock::now() + 20s);
    stream = stub->Session(&context);
    const std::string nonce = RandomBytes(kNonceBytes).value();
    WorkerMessage hello_message;
    hello_message.kind = WorkerMessage::Kind::kHello;
    hello_message.hello = hello;
    wire::WorkerMessage out = ToWire(hello_message);
    out.mutable_hello()->set_worker_nonce(nonce);
    REQUIRE(stream->Write(out));
    wire::ControllerMessage challenge = Next();
    REQUIRE(challenge.has_challenge());
    wire::WorkerMessage proof;
    proof.mutable_proof()->set_proof(ControlProof(JobCredentials{}, ControlRole::kWorker, hello,
                                                  nonce, challenge.challenge().controller_nonce()));
    REQUIRE(stream->Write(proof));
  }
  wire::ControllerMessage Next() {
    wire::ControllerMessage in;
    REQUIRE(stream->Read(&in));
    return in;
  }
  void Leave() {
    wire::WorkerMessage notice;
    notice.mutable_shutdown();
    stream->Write(notice);
    stream->WritesDone();
    wire::ControllerMessage in;
    while (stream->Read(&in)) {
    }
    CHECK(stream->Finish().ok());
  }
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<wire::Controller::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<wire::WorkerMessage, wire::ControllerMessage>> stream;
};

ControllerMessage Batch(std::vector<Response> responses) {
  ControllerMessage message;
  message.kind = ControllerMessage::Kind::kResponses;
  message.responses = std::move(responses);
  return message;
}

// A fused allreduce of `names`, with ids 1, 2, ... from `first_id`.
Response Fused(uint64_t seq, const std::vector<std::string>& names, uint32_t first_id) {
  Response response;
  response.seq = seq;
  response.names = names;
  for (size_t i = 0; i < names.size(); ++i) {
    response.cache_ids.push_back(first_id + static_cast<uint32_t>(i));
    response.num_elements.push_back(static_cast<int64_t>(10 + i));
  }
  return response;
}

TEST_CASE("Told names go by id on the wire only while every stream has heard them",
          "[transport][grpc][cached]") {
  Watchdog watchdog("responses by id", 30s);
  Controller controller(1);
  RawWorker rank0(controller.address(), MakeHello(0, 2));
  REQUIRE(rank0.Next().has_welcome());
  const std::vector<std::string> names = {"grad/a", "grad/b", "grad/c"};

  controller.server->SendToEach(1, -1, Batch({Fused(1, names, 1)}));
  wire::ControllerMessage first = rank0.Next();
  REQUIRE(first.responses().responses_size() == 1);
  CHECK_FALSE(first.responses().responses(0).by_id());
  CHECK(first.responses().responses(0).names_size() == 3);

  controller.server->SendToEach(1, -1, Batch({Fused(2, names, 1), Fused(3, {"loss"}, 9)}));
  wire::ControllerMessage second = rank0.Next();
  REQUIRE(second.responses().responses_size() == 2);
  CHECK(second.responses().responses(0).by_id());
  CHECK(second.responses().responses(0).names_size() == 0);
  CHECK(second.responses().responses(0).id_runs_size() == 1);
  CHECK_FALSE(second.responses().responses(1).by_id());  // "loss" was never told

  // A message to one stream, or one for a rank without a stream, always goes in full; one for
  // every stream but a skipped rank that has none goes by id.
  controller.server->Send(0, Batch({Fused(4, names, 1)}));
  CHECK_FALSE(rank0.Next().responses().responses(0).by_id());
  controller.server->SendToEach(2, -1, Batch({Fused(5, names, 1)}));  // rank 1 has no stream
  CHECK_FALSE(rank0.Next().responses().responses(0).by_id());
  controller.server->SendToEach(2, 1, Batch({Fused(5, names, 1)}));
  CHECK(rank0.Next().responses().responses(0).by_id());

  // Rank 1 joins: it has heard nothing, so the names are told again before going by id.
  RawWorker rank1(controller.address(), MakeHello(1, 2));
  // Admitted (registered before the handler hears its Hello), so that it gets what follows.
  REQUIRE(controller.handler
              .WaitUntil([](const testing::Recorded& r) { return r.hellos.size() == 2; }, 10s)
              .hellos.size() == 2);
  controller.server->SendToEach(2, -1, Batch({Fused(6, names, 1)}));
  CHECK_FALSE(rank0.Next().responses().responses(0).by_id());
  CHECK_FALSE(rank1.Next().responses().responses(0).by_id());
  controller.server->SendToEach(2, -1, Batch({Fused(7, names, 1)}));
  CHECK(rank0.Next().responses().responses(0).by_id());
  CHECK(rank1.Next().responses().responses(0).by_id());
  rank0.Leave();
  rank1.Leave();
}

TEST_CASE("Workers get responses by id back whole, and cache ids reach the controller whole",
          "[transport][grpc][cached]") {
  Watchdog watchdog("channels and ids", 30s);
  Controller controller(2);
  std::vector<std::unique_ptr<GrpcControlChannel>> channels;
  std::vector<Waker> wakers(2);
  std::vector<Status> joined(2);
  std::vector<std::thread> workers;
  for (int r = 0; r < 2; ++r) {
    channels.push_back(GrpcControlChannel::Create(controller.address(), kTimeoutSeconds, nullptr));
  }
  for (int r = 0; r < 2; ++r) {
    workers.emplace_back([&, r] {
      joined[r] = channels[r]
                      ->Connect(MakeHello(r, 2), std::chrono::steady_clock::now() + 10s,
                                wakers[r].Function())
                      .status();
    });
  }
  for (auto& w : workers) w.join();
  for (const Status& status : joined) REQUIRE(status.ToString() == "OK");

  std::vector<std::string> names;
  for (int i = 0; i < 161; ++i) names.push_back("grad/" + std::to_string(i));
  const std::vector<std::string> rest(names.begin() + 1, names.end());
  const std::vector<ControllerMessage> sent = {
      Batch({Fused(1, names, 1)}),                             // tells them
      Batch({Fused(2, names, 1)}),                             // by id
      Batch({Fused(3, {names[0]}, 200), Fused(4, rest, 2)}),   // grad/0 reshaped: a new id
      Batch({Fused(5, {names[0]}, 200), Fused(6, names, 1)}),  // its new id, then the old one
      Batch({Fused(7, rest, 2)})};
  for (const ControllerMessage& message : sent) {
    controller.server->SendToEach(2, -1, message);
    for (int r = 0; r < 2; ++r) {
      auto received = wakers[r].Receive(*channels[r], 5s);
      REQUIRE(received.ok());
      REQUIRE(received->has_value());
      CHECK(Diff(**received, message) == "");
    }
  }

  WorkerMessage requests;
  requests.kind = WorkerMessage::Kind::kRequests;
  for (uint32_t id = 161; id >= 1; --id) requests.requests.push_back({id, TensorMeta{}});
  requests.requests.push_back({0, testing::SampleMeta("new")});
  for (uint32_t id = 1; id <= 161; ++id) requests.requests.push_back({id, TensorMeta{}});
  REQUIRE(channels[1]->Send(requests).ok());
  auto recorded = controller.handler.WaitUntil(
      [](const testing::Recorded& r) { return !r.messages.empty(); }, 5s);
  REQUIRE(recorded.messages.size() == 1);
  CHECK(Diff(recorded.messages[0].second, requests) == "");
  for (auto& channel : channels) {
    WorkerMessage notice;
    notice.kind = WorkerMessage::Kind::kShutdown;
    REQUIRE(channel->Send(notice).ok());
    channel->Close(std::chrono::steady_clock::now() + 5s);
  }
}

}  // namespace
}  // namespace kolo::transport
