// Unit tests of the cached-id wire forms of protocol 7 (docs/PROTOCOL.md, "Cached ops by bit
// vector"): request batches whose cache ids travel as bit vectors (id_runs.h) keep every request
// and its order; malformed or oversized runs are refused; responses by id (ResponseNames) come
// back whole, and the book forgets retired ids. No network.
#include <catch2/catch.hpp>

#include "tests/transport/control_test_support.h"
#include "transport/grpc/id_runs.h"
#include "transport/grpc/response_names.h"
#include "transport/grpc/wire_convert.h"

namespace kolo::transport {
namespace {

using testing::Diff;

WorkerMessage Batch(const std::vector<Request>& requests) {
  WorkerMessage message;
  message.kind = WorkerMessage::Kind::kRequests;
  message.requests = requests;
  return message;
}

Request Id(uint32_t id) {
  return Request{id, TensorMeta{}};
}

Request Full(const std::string& name) {
  return Request{0, testing::SampleMeta(name)};
}

// The batch after a trip through bytes, and how many wire entries carried it.
StatusOr<WorkerMessage> ThroughBytes(const WorkerMessage& message, int* entries = nullptr) {
  wire::WorkerMessage parsed;
  REQUIRE(parsed.ParseFromString(ToWire(message).SerializeAsString()));
  if (entries != nullptr) *entries = parsed.requests().requests_size();
  return FromWire(parsed);
}

TEST_CASE("Cache ids travel as bit vectors, every request kept in its order",
          "[transport][wire][cached]") {
  std::vector<Request> ascending;
  for (uint32_t id = 1; id <= 161; ++id) ascending.push_back(Id(id));
  int entries = 0;
  auto back = ThroughBytes(Batch(ascending), &entries);
  REQUIRE(back.ok());
  CHECK(Diff(Batch(ascending), *back) == "");
  CHECK(entries == 1);  // one run for a ResNet-50 step
  wire::WorkerMessage encoded = ToWire(Batch(ascending));
  CHECK(encoded.ByteSizeLong() < 40);  // 161 requests in ~21 bytes of bits

  // Full metadata between ids, descending ids, gaps past kMaxIdRunGap, the every-rank bit and
  // the largest id: each starts a new run or goes alone, and the order is the batch's.
  const std::vector<Request> mixed = {Id(7),
                                      Id(8),
                                      Full("grad/w1"),
                                      Id(9),
                                      Id(30),
                                      Id(5),
                                      Id(4),
                                      Id(200),
                                      Id(201),
                                      Id(203),
                                      Id(203 + kMaxIdRunGap + 1),
                                      Id(kEveryRankCacheIdBit | 3),
                                      Id(kEveryRankCacheIdBit | 4),
                                      Full("loss"),
                                      Id(UINT32_MAX - 1),
                                      Id(UINT32_MAX)};
  back = ThroughBytes(Batch(mixed), &entries);
  REQUIRE(back.ok());
  CHECK(Diff(Batch(mixed), *back) == "");
  CHECK(entries == 10);
}

TEST_CASE("Malformed or oversized id runs are refused", "[transport][wire][cached]") {
  const auto refusal = [](uint32_t first, const std::string& bits) {
    wire::WorkerMessage message;
    wire::IdRun* run = message.mutable_requests()->add_requests()->mutable_cached();
    run->set_first(first);
    run->set_bits(bits);
    return FromWire(message).status().message();
  };
  CHECK(refusal(5, "") == "a cache id run does not start with a non-zero id");
  CHECK(refusal(5, std::string("\x02", 1)) == "a cache id run does not start with a non-zero id");
  CHECK(refusal(0, std::string("\x01", 1)) == "a cache id run does not start with a non-zero id");
  CHECK(refusal(UINT32_MAX, std::string("\x03", 1)) == "a cache id run goes past 2^32 - 1");
  // 2^20 + 8 ids set: more than one message may name.
  CHECK(refusal(1, std::string(kMaxIdsInRuns / 8 + 1, '\xff')) ==
        "a message names more than 1048576 cache ids");
  // The limit counts every run of the message.
  wire::WorkerMessage two;
  for (int i = 0; i < 2; ++i) {
    wire::IdRun* run = two.mutable_requests()->add_requests()->mutable_cached();
    run->set_first(1 + i * (1u << 24));
    run->set_bits(std::string(kMaxIdsInRuns / 16 + 1, '\xff'));
  }
  CHECK(FromWire(two).status().message() == "a message names more than 1048576 cache ids");
  // So does the limit of a controller's message, over all its responses by id.
  wire::ControllerMessage responses;
  for (int i = 0; i < 2; ++i) {
    wire::Response* response = responses.mutable_responses()->add_responses();
    response->set_by_id(true);
    wire::IdRun* run = response->add_id_runs();
    run->set_first(1 + i * (1u << 24));
    run->set_bits(std::string(kMaxIdsInRuns / 16 + 1, '\xff'));
  }
  CHECK(FromWire(responses).status().message() == "a message names more than 1048576 cache ids");
}

Response Told(uint64_t seq, std::vector<std::string> names, std::vector<uint32_t> ids,
              std::vector<int64_t> elements) {
  Response response;
  response.seq = seq;
  response.names = std::move(names);
  response.cache_ids = std::move(ids);
  response.num_elements = std::move(elements);
  return response;
}

TEST_CASE("A response by id comes back whole from what earlier responses told",
          "[transport][wire][cached]") {
  ResponseNames sender;
  ResponseNames receiver;
  const Response first = Told(1, {"a", "b", "c"}, {1, 2, kEveryRankCacheIdBit | 3}, {6, 1, 9});
  CHECK_FALSE(sender.CanGoById(first));
  sender.Learn(first);
  receiver.Learn(first);
  Response again = first;
  again.seq = 2;
  again.hierarchy_min_bytes = 0;
  REQUIRE(sender.CanGoById(again));
  wire::Response encoded;
  ToWireById(again, &encoded);
  CHECK(encoded.by_id());
  CHECK(encoded.names_size() == 0);
  wire::ControllerMessage wire_message;
  *wire_message.mutable_responses()->add_responses() = encoded;
  wire::ControllerMessage parsed;
  REQUIRE(parsed.ParseFromString(wire_message.SerializeAsString()));
  StatusOr<ControllerMessage> back = FromWire(parsed);
  REQUIRE(back.ok());
  REQUIRE(back->responses.size() == 1);
  CHECK(back->responses[0].names.empty());
  REQUIRE(receiver.Fill(&back->responses[0]).ok());
  CHECK(Diff(back->responses[0], again) == "");

  // Not by id: an error, an id never told, another count, another name, an uncached tensor.
  Response failed = again;
  failed.error = "Mismatched allreduce shapes for 'a'";
  CHECK_FALSE(sender.CanGoById(failed));
  CHECK_FALSE(sender.CanGoById(Told(3, {"a", "d"}, {1, 4}, {6, 2})));
  CHECK_FALSE(sender.CanGoById(Told(3, {"a"}, {1}, {7})));
  CHECK_FALSE(sender.CanGoById(Told(3, {"b"}, {1}, {6})));
  CHECK_FALSE(sender.CanGoById(Told(3, {"a", "x"}, {1, 0}, {6, 2})));

  // A name's new id retires its old one on both sides.
  const Response reshaped = Told(4, {"a"}, {5}, {12});
  sender.Learn(reshaped);
  receiver.Learn(reshaped);
  CHECK_FALSE(sender.CanGoById(Told(5, {"a"}, {1}, {6})));
  CHECK(sender.CanGoById(Told(5, {"a"}, {5}, {12})));
  CHECK(sender.size() == 3);
  Response stale = Told(6, {}, {1}, {});
  CHECK(receiver.Fill(&stale).message() ==
        "response 6 names cache id 1, which no earlier response told");
}

TEST_CASE("A response by id that also names tensors is refused", "[transport][wire][cached]") {
  wire::ControllerMessage message;
  wire::Response* response = message.mutable_responses()->add_responses();
  response->set_by_id(true);
  response->add_names("a");
  CHECK(FromWire(message).status().message() == "a response by cache id also carries names or ids");
}

}  // namespace
}  // namespace kolo::transport
