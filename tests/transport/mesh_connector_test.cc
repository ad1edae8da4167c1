// Tests of how TcpMesh::Connect builds the mesh (transport/tcp/mesh_connector.cc): foreign,
// malformed, unauthenticated, replayed and silent connections are refused without harming the
// real peers, and a missing
// peer fails Connect by its deadline with a message naming it. Real loopback sockets.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <sstream>
#include <thread>

#include "tests/support/loopback_mesh.h"
#include "tests/support/watchdog.h"
#include "tests/transport/pattern_exchange.h"
#include "transport/tcp/mesh_handshake.h"
#include "transport/tcp/tcp_mesh.h"
#include "transport/tcp/tcp_socket.h"
#include "transport/unique_fd.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using kolo::testing::ConnectAll;
using kolo::testing::ListenAll;
using kolo::testing::RunOnRanks;
using kolo::testing::Watchdog;
using testing::PatternExchange;

// A blocking client socket connected to `address` ("ip:port").
UniqueFd Dial(const std::string& address) {
  std::string host;
  int port = 0;
  REQUIRE(ParseHostPort(address, &host, &port).ok());
  StatusOr<SocketAddress> resolved = ResolveAddress(host, port);
  REQUIRE(resolved.ok());
  UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
  REQUIRE(connect(fd.get(), reinterpret_cast<const sockaddr*>(&resolved->storage),
                  resolved->length) == 0);
  return fd;
}

void SendAll(const UniqueFd& fd, const std::string& bytes) {
  REQUIRE(send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
}

// True if the peer closed `fd` within `limit` (EOF or reset), with no bytes sent to us.
bool ClosedByPeer(const UniqueFd& fd, std::chrono::milliseconds limit) {
  pollfd p{fd.get(), POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(limit.count())) != 1) return false;
  char byte;
  return recv(fd.get(), &byte, 1, 0) <= 0;
}

// Reads exactly `n` bytes (the socket has a receive timeout); "" on timeout or close.
std::string RecvExactly(const UniqueFd& fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd.get(), out.data() + got, n - got, 0);
    if (r <= 0) return "";
    got += static_cast<size_t>(r);
  }
  return out;
}

void SetReceiveTimeout(const UniqueFd& fd, std::chrono::milliseconds limit) {
  timeval tv{static_cast<time_t>(limit.count() / 1000),
             static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
  REQUIRE(setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
}

// Runs the dialler's side of the handshake by hand with `auth`, as rank `rank` of `size`
// dialling `acceptor`; returns the bytes it sent (Dial then Proof) so that a test can replay
// them. Empty if the acceptor never answered.
std::string HandshakeAsDialler(const UniqueFd& fd, const MeshAuth& auth, int rank, int size,
                               int acceptor) {
  SetReceiveTimeout(fd, std::chrono::seconds(5));
  const std::string nonce = RandomBytes(kNonceBytes).value();
  const std::string dial =
      EncodeMeshFrame({kMeshProtocolVersion, MeshFrameKind::kDial, rank, size, nonce, ""});
  SendAll(fd, dial);
  const std::string accept = RecvExactly(fd, kMeshFrameHeaderBytes + kNonceBytes + kMacBytes);
  if (accept.empty()) return "";
  const std::string acceptor_nonce = accept.substr(kMeshFrameHeaderBytes, kNonceBytes);
  const std::string proof = EncodeMeshFrame(
      {kMeshProtocolVersion, MeshFrameKind::kProof, rank, size, "",
       MeshProof(auth, MeshRole::kDialler, rank, acceptor, size, nonce, acceptor_nonce)});
  SendAll(fd, proof);
  return dial + proof;
}

long MaxRssKb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST_CASE(
    "Foreign, unauthenticated, replayed and oversized connections are refused and the real "
    "peers still connect",
    "[transport][tcp_mesh][security]") {
  Watchdog watchdog("foreign connections", 30s);
  std::vector<std::string> addresses;
  auto meshes = ListenAll(3, /*timeout_seconds=*/10, &addresses);
  REQUIRE(meshes.size() == 3);
  // Rank 0's log, to check that each refusal says why.
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  TcpMesh::Config config = kolo::testing::MeshConfig(0, 3);
  config.logger = std::make_shared<spdlog::logger>("capture", sink);
  auto rank0 = TcpMesh::Listen(config);
  REQUIRE(rank0.ok());
  meshes[0] = std::move(rank0).value();
  addresses[0] = meshes[0]->listen_address();

  // A recording of rank 2's real handshake with another rank 0 of the same job.
  std::string recorded;
  {
    auto decoy = TcpMesh::Listen(kolo::testing::MeshConfig(0, 3));
    REQUIRE(decoy.ok());
    std::thread accepting([&] {
      (*decoy)
          ->Connect({"", "127.0.0.1:1", "127.0.0.1:1"},
                    std::chrono::steady_clock::now() + 1500ms)
          .IgnoreError();  // rank 1 never comes: it only has to accept rank 2
    });
    UniqueFd real = Dial((*decoy)->listen_address());
    recorded = HandshakeAsDialler(real, config.auth, 2, 3, 0);
    accepting.join();
  }
  REQUIRE_FALSE(recorded.empty());

  // Rank 0 starts connecting alone, so that every attack meets its handshake before the real
  // ranks arrive (a real rank 2 already admitted would make a later claim a plain duplicate).
  const long rss_before = MaxRssKb();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + 10s;
  std::vector<Status> results(3);
  std::thread rank0_connecting([&] { results[0] = meshes[0]->Connect(addresses, deadline); });
  UniqueFd garbage = Dial(addresses[0]);
  SendAll(garbage, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  UniqueFd huge_length = Dial(addresses[0]);
  std::string huge = EncodeMeshFrame(
      {kMeshProtocolVersion, MeshFrameKind::kDial, 2, 3, std::string(kNonceBytes, 'n'), ""});
  huge = huge.substr(0, kMeshFrameHeaderBytes);
  huge[20] = '\x80';  // payload length 2^63
  for (int i = 21; i < 28; ++i) huge[i] = '\0';
  SendAll(huge_length, huge);
  UniqueFd wrong_secret = Dial(addresses[0]);
  MeshAuth wrong = config.auth;
  wrong.credentials.key = "not-this-jobs-key";
  CHECK_FALSE(HandshakeAsDialler(wrong_secret, wrong, 2, 3, 0).empty());
  UniqueFd replayed = Dial(addresses[0]);
  SendAll(replayed, recorded);
  UniqueFd silent = Dial(addresses[0]);
  CHECK(ClosedByPeer(garbage, 2s));
  CHECK(ClosedByPeer(huge_length, 2s));
  // These two get rank 0's Accept, then the close once it has checked their proof.
  for (const UniqueFd* fd : {&wrong_secret, &replayed}) {
    SetReceiveTimeout(*fd, 2s);
    char buffer[256];
    ssize_t n = 0;
    while ((n = recv(fd->get(), buffer, sizeof(buffer), 0)) > 0) {
    }
    CHECK(n == 0);  // closed, not timed out
  }

  RunOnRanks(2, [&](int i) { results[i + 1] = meshes[i + 1]->Connect(addresses, deadline); });
  rank0_connecting.join();
  for (const Status& status : results) CHECK(status.ToString() == "OK");
  std::vector<std::string> failures(3);
  RunOnRanks(3, [&](int r) {
    PatternExchange exchange(r, (r + 1) % 3, 1000, 1000);
    Status status = meshes[r]->Exchange((r + 1) % 3, (r + 2) % 3, exchange, "ring");
    failures[r] = status.ok() ? exchange.Check((r + 2) % 3, r) : status.ToString();
  });
  for (const std::string& failure : failures) CHECK(failure == "");
  CHECK(ClosedByPeer(silent, 2s));  // closed once the mesh was complete

  // Bound: the mesh's own 10 s timeout; refusals do not wait for it.
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(MaxRssKb() - rss_before < 16 * 1024);  // no allocation for the 2^63 length field
  const std::string text = log.str();
  CHECK_THAT(text, Catch::Contains("wrong magic"));
  CHECK_THAT(text, Catch::Contains("payload length of 9223372036854775808 bytes; it must be 32"));
  CHECK_THAT(text, Catch::Contains("wrong handshake proof for rank 2"));
  // The wrong secret and the replay are both refused for their proof (the second line within
  // a second is rate-limited into a count), and the log never shows a key.
  CHECK(text.find("not-this-jobs-key") == std::string::npos);
}

TEST_CASE("A lazy mesh's open listener still refuses foreign connections while peers connect",
          "[transport][tcp_mesh][security][lazy]") {
  Watchdog watchdog("lazy foreign connections", 30s);
  std::vector<std::string> addresses;
  auto meshes = ListenAll(4, /*timeout_seconds=*/10, &addresses);
  REQUIRE(meshes.size() == 4);
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  TcpMesh::Config config = kolo::testing::MeshConfig(0, 4);
  config.lazy = true;
  config.logger = std::make_shared<spdlog::logger>("capture", sink);
  auto rank0 = TcpMesh::Listen(config);
  REQUIRE(rank0.ok());
  meshes[0] = std::move(rank0).value();
  addresses[0] = meshes[0]->listen_address();
  for (const Status& status : ConnectAll(meshes, addresses)) REQUIRE(status.ToString() == "OK");

  // Rank 0 keeps listening; these wait in its backlog until it connects rank 2 on first use.
  UniqueFd garbage = Dial(addresses[0]);
  SendAll(garbage, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  UniqueFd wrong_secret = Dial(addresses[0]);
  MeshAuth wrong = config.auth;
  wrong.credentials.key = "not-this-jobs-key";
  std::promise<bool> impostor_answered;
  std::thread impostor([&] {
    // Claims rank 2 before the real one dials, so rank 0 answers it and then checks its proof.
    impostor_answered.set_value(!HandshakeAsDialler(wrong_secret, wrong, 2, 4, 0).empty());
  });
  std::vector<std::string> failures(4);
  RunOnRanks(4, [&](int r) {
    if (r != 0 && r != 2) return;
    if (r == 2 && !impostor_answered.get_future().get()) {
      failures[2] = "rank 0 did not answer the impostor";
      return;
    }
    PatternExchange exchange(r, 2 - r, 1000, 1000);
    Status status = meshes[r]->Exchange(2 - r, 2 - r, exchange, "pair");
    failures[r] = status.ok() ? exchange.Check(2 - r, r) : status.ToString();
  });
  impostor.join();
  for (const std::string& failure : failures) CHECK(failure == "");
  CHECK(ClosedByPeer(garbage, 2s));
  SetReceiveTimeout(wrong_secret, 2s);
  char buffer[256];
  ssize_t n = 0;
  while ((n = recv(wrong_secret.get(), buffer, sizeof(buffer), 0)) > 0) {
  }
  CHECK(n == 0);  // closed, not timed out
  const std::string text = log.str();
  CHECK_THAT(text, Catch::Contains("wrong magic"));
  CHECK_THAT(text, Catch::Contains("wrong handshake proof for rank 2"));
}

TEST_CASE("Connect fails by its deadline naming the ranks it misses", "[transport][tcp_mesh]") {
  Watchdog watchdog("connect deadline", 30s);
  std::vector<std::string> addresses;
  auto meshes = ListenAll(3, /*timeout_seconds=*/10, &addresses);
  REQUIRE(meshes.size() == 3);
  // Rank 0 never calls Connect (its listener queues rank 1's connection but never answers);
  // rank 2 is gone entirely.
  const std::string rank2_address = addresses[2];
  meshes[2].reset();
  const auto start = std::chrono::steady_clock::now();
  Status status = meshes[1]->Connect(addresses, start + 500ms);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(status.code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(status.message(),
             Catch::StartsWith("data mesh of rank 1: not connected to every peer by the deadline"));
  CHECK_THAT(status.message(), Catch::Contains("rank 0 at " + addresses[0] + ": "));
  CHECK_THAT(status.message(), Catch::Contains("rank 2 never connected to this rank"));
  CHECK(elapsed >= 0.5);
  CHECK(elapsed < 1.0);
}

TEST_CASE("A rank of another job, or of another generation, cannot join, and says why",
          "[transport][tcp_mesh][security]") {
  const int differs = GENERATE(0, 1, 2);  // secret, job id, generation
  Watchdog watchdog("wrong secret", 30s);
  std::vector<std::string> addresses;
  auto meshes = ListenAll(2, /*timeout_seconds=*/10, &addresses);
  REQUIRE(meshes.size() == 2);
  meshes[0]->SetGeneration("generation-1");
  TcpMesh::Config config = kolo::testing::MeshConfig(1, 2);
  if (differs == 0) config.auth.credentials.key = "another-jobs-key";
  if (differs == 1) config.auth.credentials.job_id = "another-job";
  auto intruder = TcpMesh::Listen(config);
  REQUIRE(intruder.ok());
  meshes[1] = std::move(intruder).value();
  meshes[1]->SetGeneration(differs == 2 ? "generation-0" : "generation-1");
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> results = ConnectAll(meshes, addresses, 1s);
  CHECK(std::chrono::steady_clock::now() - start < 3s);  // the 1 s deadline, generous margin
  CHECK(results[0].code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(results[0].message(), Catch::Contains("rank 1 never connected to this rank"));
  CHECK(results[1].code() == StatusCode::kUnavailable);
  CHECK_THAT(results[1].message(),
             Catch::Contains(addresses[0] +
                             ", the address of rank 0, answered the handshake "
                             "wrongly: it could not prove that it holds this job's secret"));
}

TEST_CASE("Listening on all interfaces requires an advertised host", "[transport][tcp_mesh]") {
  TcpMesh::Config config = kolo::testing::MeshConfig(0, 2);
  config.bind_host = "0.0.0.0";
  auto refused = TcpMesh::Listen(config);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(), Catch::Contains("advertise host"));
  config.advertise_host = "127.0.0.1";
  auto mesh = TcpMesh::Listen(config);
  REQUIRE(mesh.ok());
  CHECK_THAT((*mesh)->listen_address(), Catch::StartsWith("127.0.0.1:"));
}

}  // namespace
}  // namespace kolo::transport
