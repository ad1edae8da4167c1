// Unit tests of the data-mesh handshake encoding, its bounded parser and its checks, and of
// the address helpers of transport/tcp_socket.h. No network.
#include "transport/mesh_handshake.h"

#include <catch2/catch.hpp>

#include "core/clock.h"
#include "transport/deadline.h"
#include "transport/tcp_socket.h"

namespace kolo::transport {
namespace {

// Feeds `bytes` to a reader `step` bytes at a time; returns the first error, or OK.
Status Feed(MeshHelloReader& reader, const std::string& bytes, size_t step) {
  size_t offset = 0;
  while (reader.BytesWanted() > 0 && offset < bytes.size()) {
    const size_t n = std::min({step, reader.BytesWanted(), bytes.size() - offset});
    std::copy_n(bytes.data() + offset, n, reader.WritePtr());
    offset += n;
    KOLO_RETURN_IF_ERROR(reader.Advance(n));
  }
  return Status::Ok();
}

TEST_CASE("A mesh hello survives encoding and parsing in any chunking", "[transport][handshake]") {
  const size_t step = GENERATE(size_t{1}, size_t{3}, size_t{1000});
  const std::string token =
      GENERATE(std::string(), std::string("tok\0en", 6), std::string(kMaxJobTokenBytes, 'x'));
  const std::string bytes = EncodeMeshHello({kMeshProtocolVersion, 5, 8, token});
  MeshHelloReader reader;
  REQUIRE(Feed(reader, bytes + "trailing data stream", step).ok());
  REQUIRE(reader.complete());
  CHECK(reader.BytesWanted() == 0);
  CHECK(reader.hello().rank == 5);
  CHECK(reader.hello().size == 8);
  CHECK(reader.hello().job_token == token);
}

TEST_CASE("The parser refuses a bad magic after four bytes", "[transport][handshake]") {
  MeshHelloReader reader;
  Status status = Feed(reader, "GET / HTTP/1.1", 1);
  CHECK(status.message() == "not a kolo data-mesh connection (wrong magic)");
  CHECK(reader.BytesWanted() == 0);
}

TEST_CASE("The parser refuses another protocol version", "[transport][handshake]") {
  MeshHelloReader reader;
  Status status = Feed(reader, EncodeMeshHello({7, 1, 2, "t"}), 64);
  CHECK(status.message() == "data-mesh protocol version 7, this rank speaks 1");
}

TEST_CASE("The parser refuses an oversized token length before reading it",
          "[transport][handshake]") {
  std::string bytes = EncodeMeshHello({kMeshProtocolVersion, 1, 2, ""});
  bytes[18] = '\x01';  // length 257
  bytes[19] = '\x01';
  MeshHelloReader reader;
  Status status = Feed(reader, bytes, 64);
  CHECK(status.message() == "job token length 257 exceeds 256 bytes");
  CHECK(reader.BytesWanted() == 0);
}

TEST_CASE("Peer hellos are checked against this rank's view of the job", "[transport][handshake]") {
  const std::string token = "secret";
  CHECK(CheckPeerHello({kMeshProtocolVersion, 2, 4, token}, 0, 4, token, -1).ok());
  CHECK(CheckPeerHello({kMeshProtocolVersion, 2, 4, token}, 0, 4, token, 2).ok());
  CHECK(CheckPeerHello({kMeshProtocolVersion, 2, 4, "secreT"}, 0, 4, token, -1).message() ==
        "wrong job token (the peer belongs to another job or generation)");
  CHECK(CheckPeerHello({kMeshProtocolVersion, 2, 5, token}, 0, 4, token, -1).message() ==
        "peer claims rank 2 of a job of size 5, this job has size 4");
  CHECK(CheckPeerHello({kMeshProtocolVersion, 4, 4, token}, 0, 4, token, -1).message() ==
        "peer claims rank 4, not a valid peer of rank 0 in a job of size 4");
  CHECK(CheckPeerHello({kMeshProtocolVersion, 0, 4, token}, 0, 4, token, -1).message() ==
        "peer claims rank 0, not a valid peer of rank 0 in a job of size 4");
  CHECK(CheckPeerHello({kMeshProtocolVersion, 3, 4, token}, 0, 4, token, 2).message() ==
        "peer claims rank 3, expected rank 2");
}

TEST_CASE("Addresses are split and joined", "[transport][tcp_socket]") {
  std::string host;
  int port = 0;
  REQUIRE(ParseHostPort("10.0.0.1:29500", &host, &port).ok());
  CHECK(host == "10.0.0.1");
  CHECK(port == 29500);
  REQUIRE(ParseHostPort("[::1]:0", &host, &port).ok());
  CHECK(host == "::1");
  CHECK(port == 0);
  CHECK(JoinHostPort("::1", 7) == "[::1]:7");
  CHECK(JoinHostPort("node-3", 7) == "node-3:7");
  CHECK_FALSE(ParseHostPort("10.0.0.1", &host, &port).ok());
  CHECK_FALSE(ParseHostPort("10.0.0.1:", &host, &port).ok());
  CHECK_FALSE(ParseHostPort("h:65536", &host, &port).ok());
  CHECK_FALSE(ParseHostPort("h:12a", &host, &port).ok());
  CHECK(IsWildcardHost("0.0.0.0"));
  CHECK_FALSE(IsWildcardHost("127.0.0.1"));
}

TEST_CASE("Durations print compactly and poll timeouts round up", "[transport][deadline]") {
  CHECK(SecondsText(30) == "30 s");
  CHECK(SecondsText(0.5) == "0.5 s");
  const SteadyTime now{};
  CHECK(PollTimeoutMs(now, now - std::chrono::seconds(1)) == 0);
  CHECK(PollTimeoutMs(now, now + std::chrono::microseconds(1)) == 1);
  CHECK(PollTimeoutMs(now, AddSeconds(now, 2.5)) == 2500);
}

}  // namespace
}  // namespace kolo::transport
