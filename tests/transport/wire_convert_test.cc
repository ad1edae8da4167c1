// Unit tests of transport/grpc/wire_convert: every field of every core/messages.h struct survives a
// round trip through the generated protobuf types (and through bytes), and malformed wire
// messages are refused. No network.
#include "transport/grpc/wire_convert.h"

#include <catch2/catch.hpp>

#include "tests/transport/control_test_support.h"

namespace kolo::transport {
namespace {

using testing::Diff;

template <typename Wire, typename Message>
std::string RoundTrip(const Message& message) {
  Wire parsed;
  if (!parsed.ParseFromString(ToWire(message).SerializeAsString())) return "unparseable";
  auto back = FromWire(parsed);
  if (!back.ok()) return back.status().ToString();
  return Diff(message, *back);
}

TEST_CASE("Worker messages of every kind survive a round trip", "[transport][wire]") {
  WorkerMessage hello;
  hello.kind = WorkerMessage::Kind::kHello;
  hello.hello = testing::SampleHello(3);
  WorkerMessage abort;
  abort.kind = WorkerMessage::Kind::kAbort;
  abort.reason = "rank 3: CUDA error: out of memory";
  WorkerMessage shutdown;
  shutdown.kind = WorkerMessage::Kind::kShutdown;
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  WorkerMessage empty_batch;
  empty_batch.kind = WorkerMessage::Kind::kRequests;
  for (const WorkerMessage& message :
       {hello, testing::SampleRequests(), abort, shutdown, ping, empty_batch}) {
    CHECK(RoundTrip<wire::WorkerMessage>(message) == "");
  }
}

TEST_CASE("One message reused for batch after batch reads each as a fresh one would",
          "[transport][wire]") {
  // The server parses every stream's messages into one scratch message, whose request slots
  // are reused: a slot that held metadata must not lend it to a cache id.
  WorkerMessage ids;
  ids.kind = WorkerMessage::Kind::kRequests;
  for (uint32_t id : {1u, 2u, 3u, 5u, 42u, 43u, 200u}) ids.requests.push_back({id, TensorMeta{}});
  WorkerMessage few_ids;
  few_ids.kind = WorkerMessage::Kind::kRequests;
  few_ids.requests.push_back({7, TensorMeta{}});
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  ping.ping_unix_us = 12;
  WorkerMessage scratch;
  for (const WorkerMessage& message :
       {testing::SampleRequests(), ids, testing::SampleRequests(), few_ids, ping, ids}) {
    wire::WorkerMessage parsed;
    REQUIRE(parsed.ParseFromString(ToWire(message).SerializeAsString()));
    REQUIRE(FromWire(parsed, &scratch).ok());
    CHECK(testing::Diff(message, scratch) == "");
    CHECK(scratch.ping_unix_us == message.ping_unix_us);
    for (const Request& request : scratch.requests) {
      if (request.cache_id != 0) CHECK(request.meta == TensorMeta{});
    }
  }
}

TEST_CASE("Controller messages of every kind survive a round trip", "[transport][wire]") {
  ControllerMessage welcome;
  welcome.kind = ControllerMessage::Kind::kWelcome;
  welcome.peers = {{0, "node-0", "10.0.0.1:4000"}, {1, "node-1", "[fe80::1]:4001"}};
  ControllerMessage empty_welcome;
  empty_welcome.kind = ControllerMessage::Kind::kWelcome;
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = "rank 2 closed the connection";
  ControllerMessage shutdown;
  shutdown.kind = ControllerMessage::Kind::kShutdown;
  for (const ControllerMessage& message :
       {welcome, empty_welcome, testing::SampleResponses(), abort, shutdown}) {
    CHECK(RoundTrip<wire::ControllerMessage>(message) == "");
  }
}

TEST_CASE("Malformed wire messages are refused", "[transport][wire]") {
  CHECK(FromWire(wire::WorkerMessage()).status().message() == "a worker message has no kind");
  CHECK(FromWire(wire::ControllerMessage()).status().message() ==
        "a controller message has no kind");
  wire::WorkerMessage zero_id;
  zero_id.mutable_requests()->add_requests()->set_cache_id(0);
  CHECK(FromWire(zero_id).status().message() == "a request names cache id 0");
  wire::WorkerMessage no_kind;
  no_kind.mutable_requests()->add_requests();
  CHECK(FromWire(no_kind).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kolo::transport
