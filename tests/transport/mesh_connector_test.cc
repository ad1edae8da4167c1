// Tests of how TcpMesh::Connect builds the mesh (transport/mesh_connector.cc): foreign,
// malformed and silent connections are refused without harming the real peers, and a missing
// peer fails Connect by its deadline with a message naming it. Real loopback sockets.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <sstream>

#include "tests/support/watchdog.h"
#include "tests/transport/mesh_test_support.h"
#include "transport/mesh_handshake.h"
#include "transport/tcp_mesh.h"
#include "transport/tcp_socket.h"
#include "transport/unique_fd.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using kolo::testing::Watchdog;
using testing::ConnectAll;
using testing::ListenAll;
using testing::PatternExchange;
using testing::RunRanks;

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

TEST_CASE("Foreign connections are refused and the real peers still connect",
          "[transport][tcp_mesh]") {
  Watchdog watchdog("foreign connections", 30s);
  std::vector<std::string> addresses;
  auto meshes = ListenAll(3, /*timeout_seconds=*/10, &addresses);
  REQUIRE(meshes.size() == 3);
  // Rank 0's log, to check that each refusal says why.
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  TcpMesh::Config config = testing::MeshConfig(0, 3);
  config.logger = std::make_shared<spdlog::logger>("capture", sink);
  auto rank0 = TcpMesh::Listen(config);
  REQUIRE(rank0.ok());
  meshes[0] = std::move(rank0).value();
  addresses[0] = meshes[0]->listen_address();

  UniqueFd garbage = Dial(addresses[0]);
  SendAll(garbage, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  UniqueFd wrong_token = Dial(addresses[0]);
  SendAll(wrong_token, EncodeMeshHello({kMeshProtocolVersion, 2, 3, "another-job"}));
  UniqueFd huge_token = Dial(addresses[0]);
  std::string huge = EncodeMeshHello({kMeshProtocolVersion, 2, 3, ""});
  huge[16] = '\x7f';  // token length 0x7f000000
  SendAll(huge_token, huge);
  UniqueFd silent = Dial(addresses[0]);

  for (const Status& status : ConnectAll(meshes, addresses)) CHECK(status.ToString() == "OK");
  std::vector<std::string> failures(3);
  RunRanks(3, [&](int r) {
    PatternExchange exchange(r, (r + 1) % 3, 1000, 1000);
    Status status = meshes[r]->Exchange((r + 1) % 3, (r + 2) % 3, exchange, "ring");
    failures[r] = status.ok() ? exchange.Check((r + 2) % 3, r) : status.ToString();
  });
  for (const std::string& failure : failures) CHECK(failure == "");

  CHECK(ClosedByPeer(garbage, 2s));
  CHECK(ClosedByPeer(wrong_token, 2s));
  CHECK(ClosedByPeer(huge_token, 2s));
  CHECK(ClosedByPeer(silent, 2s));  // closed once the mesh was complete
  const std::string text = log.str();
  CHECK_THAT(text, Catch::Contains("wrong magic"));
  CHECK_THAT(text, Catch::Contains("wrong job token"));
  CHECK_THAT(text, Catch::Contains("job token length 2130706432 exceeds 256 bytes"));
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

TEST_CASE("A rank with another job's token cannot join", "[transport][tcp_mesh]") {
  Watchdog watchdog("wrong token", 30s);
  std::vector<std::string> addresses;
  auto meshes = ListenAll(2, /*timeout_seconds=*/10, &addresses);
  REQUIRE(meshes.size() == 2);
  TcpMesh::Config config = testing::MeshConfig(1, 2);
  config.job_token = "another-job";
  auto intruder = TcpMesh::Listen(config);
  REQUIRE(intruder.ok());
  meshes[1] = std::move(intruder).value();
  std::vector<Status> results = ConnectAll(meshes, addresses, 1s);
  CHECK(results[0].code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(results[0].message(), Catch::Contains("rank 1 never connected to this rank"));
  CHECK(results[1].code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(results[1].message(), Catch::Contains("rank 0 at " + addresses[0] + ": "));
}

TEST_CASE("Listening on all interfaces requires an advertised host", "[transport][tcp_mesh]") {
  TcpMesh::Config config = testing::MeshConfig(0, 2);
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
