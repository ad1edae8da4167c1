// Unit tests of the data-mesh handshake encoding, its bounded parser, its checks and proofs,
// and of the address helpers of transport/tcp/tcp_socket.h. No network.
#include "transport/tcp/mesh_handshake.h"

#include <catch2/catch.hpp>

#include "core/clock.h"
#include "transport/deadline.h"
#include "transport/tcp/tcp_socket.h"

namespace kolo::transport {
namespace {

// Feeds `bytes` to a reader `step` bytes at a time; returns the first error, or OK.
Status Feed(MeshFrameReader& reader, const std::string& bytes, size_t step) {
  size_t offset = 0;
  while (reader.BytesWanted() > 0 && offset < bytes.size()) {
    const size_t n = std::min({step, reader.BytesWanted(), bytes.size() - offset});
    std::copy_n(bytes.data() + offset, n, reader.WritePtr());
    offset += n;
    KOLO_RETURN_IF_ERROR(reader.Advance(n));
  }
  return Status::Ok();
}

const std::string kNonce(kNonceBytes, 'n');
const std::string kProof(kMacBytes, 'p');

MeshFrame Dial(int rank, int size) {
  return {kMeshProtocolVersion, MeshFrameKind::kDial, rank, size, kNonce, ""};
}

TEST_CASE("Mesh frames survive encoding and parsing in any chunking", "[transport][handshake]") {
  const size_t step = GENERATE(size_t{1}, size_t{3}, size_t{1000});
  const MeshFrame frame =
      GENERATE(MeshFrame{kMeshProtocolVersion, MeshFrameKind::kDial, 5, 8, kNonce, ""},
               MeshFrame{kMeshProtocolVersion, MeshFrameKind::kAccept, 5, 8, kNonce, kProof},
               MeshFrame{kMeshProtocolVersion, MeshFrameKind::kProof, 5, 8, "", kProof});
  MeshFrameReader reader;
  REQUIRE(Feed(reader, EncodeMeshFrame(frame) + "trailing data stream", step).ok());
  REQUIRE(reader.complete());
  CHECK(reader.BytesWanted() == 0);
  CHECK(reader.frame().kind == frame.kind);
  CHECK(reader.frame().rank == 5);
  CHECK(reader.frame().size == 8);
  CHECK(reader.frame().nonce == frame.nonce);
  CHECK(reader.frame().proof == frame.proof);
}

TEST_CASE("The parser refuses a bad magic after four bytes", "[transport][handshake]") {
  MeshFrameReader reader;
  Status status = Feed(reader, "GET / HTTP/1.1", 1);
  CHECK(status.message() == "not a kolo data-mesh connection (wrong magic)");
  CHECK(reader.BytesWanted() == 0);
}

TEST_CASE("The parser refuses another protocol version and unknown kinds",
          "[transport][handshake]") {
  MeshFrame old = Dial(1, 2);
  old.version = 1;
  MeshFrameReader reader;
  CHECK(Feed(reader, EncodeMeshFrame(old), 64).message() ==
        "data-mesh protocol version 1, this rank speaks 2");
  std::string bytes = EncodeMeshFrame(Dial(1, 2));
  bytes[11] = '\x09';
  MeshFrameReader kind_reader;
  CHECK(Feed(kind_reader, bytes, 64).message() == "unknown data-mesh handshake message kind 9");
}

TEST_CASE("The parser refuses a length field of 2^63 as soon as it arrives, allocating nothing",
          "[transport][handshake]") {
  std::string bytes = EncodeMeshFrame(Dial(1, 2)).substr(0, kMeshFrameHeaderBytes);
  bytes[20] = '\x80';  // payload length 2^63
  for (int i = 21; i < 28; ++i) bytes[i] = '\0';
  MeshFrameReader reader;
  Status status = Feed(reader, bytes, 1);
  CHECK(status.message() ==
        "handshake dial message with a payload length of 9223372036854775808 bytes; it must be "
        "32");
  CHECK(reader.BytesWanted() == 0);
  static_assert(sizeof(MeshFrameReader) < 512, "the reader's buffer is fixed and small");
}

TEST_CASE("Peer identities are checked against this rank's view of the job",
          "[transport][handshake]") {
  CHECK(CheckPeerIdentity(Dial(2, 4), 0, 4, -1).ok());
  CHECK(CheckPeerIdentity(Dial(2, 4), 0, 4, 2).ok());
  CHECK(CheckPeerIdentity(Dial(2, 5), 0, 4, -1).message() ==
        "peer claims rank 2 of a job of size 5, this job has size 4");
  CHECK(CheckPeerIdentity(Dial(4, 4), 0, 4, -1).message() ==
        "peer claims rank 4, not a valid peer of rank 0 in a job of size 4");
  CHECK(CheckPeerIdentity(Dial(0, 4), 0, 4, -1).message() ==
        "peer claims rank 0, not a valid peer of rank 0 in a job of size 4");
  CHECK(CheckPeerIdentity(Dial(3, 4), 0, 4, 2).message() == "peer claims rank 3, expected rank 2");
}

TEST_CASE("Mesh proofs bind the role, job, generation, ranks and nonces",
          "[transport][handshake]") {
  const MeshAuth auth{{"0123456789abcdef", "job"}, "gen-1"};
  const std::string dn(kNonceBytes, 'd');
  const std::string an(kNonceBytes, 'a');
  const std::string proof = MeshProof(auth, MeshRole::kDialler, 2, 1, 4, dn, an);
  CHECK(proof.size() == kMacBytes);
  CHECK(MeshProof(auth, MeshRole::kAcceptor, 2, 1, 4, dn, an) != proof);
  CHECK(MeshProof({auth.credentials, "gen-2"}, MeshRole::kDialler, 2, 1, 4, dn, an) != proof);
  CHECK(MeshProof({{auth.credentials.key, "job2"}, "gen-1"}, MeshRole::kDialler, 2, 1, 4, dn, an) !=
        proof);
  CHECK(MeshProof(auth, MeshRole::kDialler, 3, 1, 4, dn, an) != proof);
  CHECK(MeshProof(auth, MeshRole::kDialler, 2, 1, 4, dn, dn) != proof);
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
