// Fuzz target: control messages as the controller and the workers receive them over gRPC: the
// protobuf decoding of kolo::wire messages, their conversion to core structs
// (transport/grpc/wire_convert.h), and, for worker messages, what the controller does with them
// (controller/negotiator.h: cache ids, metadata validation, readiness, fusion planning).
//
// Input: byte 0 picks the receiver (even: the controller, odd: a worker), byte 1 the job size
// (1-4), byte 2 the response cache capacity (0-7); then records of [rank byte][2-byte
// big-endian length][serialized WorkerMessage or ControllerMessage]. Checks: a converted
// message survives ToWire -> bytes -> FromWire unchanged; the Negotiator refuses bad batches
// with a status rather than crashing; planned responses are numbered in order with parallel
// arrays of matching length, and survive the trip to the worker.
#include <string>
#include <vector>

#include "controller/negotiator.h"
#include "fuzz/fuzz_input.h"
#include "transport/grpc/wire_convert.h"

namespace kolo::transport {
namespace {

// Converts `wire` to a core struct and back twice; the two byte strings must agree (the first
// trip may drop unknown fields and normalize; after that nothing may change).
template <typename Wire, typename Message>
StatusOr<Message> Convert(const Wire& wire) {
  StatusOr<Message> message = FromWire(wire);
  if (!message.ok()) {
    KOLO_FUZZ_CHECK(!message.status().message().empty(), "FromWire failed without a message");
    return message;
  }
  const std::string once = ToWire(*message).SerializeAsString();
  Wire reparsed;
  KOLO_FUZZ_CHECK(reparsed.ParseFromString(once), "ToWire produced unparseable bytes");
  StatusOr<Message> again = FromWire(reparsed);
  KOLO_FUZZ_CHECK(again.ok(), "a converted message fails FromWire: %s",
                  again.status().ToString().c_str());
  KOLO_FUZZ_CHECK(ToWire(*again).SerializeAsString() == once, "round trip changed the message");
  return message;
}

void CheckResponses(const std::vector<Response>& responses, uint64_t* last_seq) {
  for (const Response& r : responses) {
    KOLO_FUZZ_CHECK(r.seq == *last_seq + 1, "response %llu after %llu",
                    static_cast<unsigned long long>(r.seq),
                    static_cast<unsigned long long>(*last_seq));
    *last_seq = r.seq;
    KOLO_FUZZ_CHECK(!r.names.empty(), "response %llu names no tensor",
                    static_cast<unsigned long long>(r.seq));
    KOLO_FUZZ_CHECK(r.cache_ids.size() == r.names.size() && r.num_elements.size() == r.names.size(),
                    "response %llu: %zu names, %zu cache ids, %zu element counts",
                    static_cast<unsigned long long>(r.seq), r.names.size(), r.cache_ids.size(),
                    r.num_elements.size());
    for (int64_t n : r.num_elements)
      KOLO_FUZZ_CHECK(n >= 0, "negative element count %lld", static_cast<long long>(n));
  }
  // What the workers receive must decode to the same responses.
  ControllerMessage message;
  message.kind = ControllerMessage::Kind::kResponses;
  message.responses = responses;
  wire::ControllerMessage wire = ToWire(message);
  wire::ControllerMessage parsed;
  KOLO_FUZZ_CHECK(parsed.ParseFromString(wire.SerializeAsString()), "unparseable responses");
  (void)Convert<wire::ControllerMessage, ControllerMessage>(parsed);
}

// Feeds the controller as the Controller does: requests and shutdown notices by rank; a
// protocol error aborts the job, so nothing after it is applied.
void ToController(fuzz::FuzzInput& in) {
  const int size = static_cast<int>(in.Range(1, 4));
  Options options;
  options.size = size;
  options.fusion_threshold_bytes = int64_t{1} << 12;
  options.cache_capacity = static_cast<int>(in.Byte() % 8);
  controller::Negotiator negotiator(options);
  Clock::TimePoint now{};
  uint64_t last_seq = 0;
  while (in.remaining() > 0) {
    const int rank = in.Byte() % size;
    const std::string bytes = in.Bytes(static_cast<size_t>(in.Range(0, 0xffff)));
    wire::WorkerMessage wire;
    if (!wire.ParseFromString(bytes)) continue;  // gRPC would have refused it
    StatusOr<WorkerMessage> message = Convert<wire::WorkerMessage, WorkerMessage>(wire);
    if (!message.ok()) return;  // the server ends the stream
    now += std::chrono::milliseconds(1);
    if (message->kind == WorkerMessage::Kind::kRequests) {
      if (!negotiator.AddRequests(rank, message->requests, now).ok()) return;
    } else if (message->kind == WorkerMessage::Kind::kShutdown) {
      negotiator.AddShutdown(rank);
    }
    CheckResponses(negotiator.Plan(), &last_seq);
  }
}

void ToWorker(fuzz::FuzzInput& in) {
  in.Byte();
  in.Byte();
  while (in.remaining() > 0) {
    in.Byte();
    const std::string bytes = in.Bytes(static_cast<size_t>(in.Range(0, 0xffff)));
    wire::ControllerMessage wire;
    if (!wire.ParseFromString(bytes)) continue;
    (void)Convert<wire::ControllerMessage, ControllerMessage>(wire);
  }
}

}  // namespace
}  // namespace kolo::transport

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::FuzzInput in(data, size);
  if (in.Byte() % 2 == 0) {
    kolo::transport::ToController(in);
  } else {
    kolo::transport::ToWorker(in);
  }
  return 0;
}
