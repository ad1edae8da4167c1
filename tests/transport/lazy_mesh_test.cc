// Multi-rank tests of a lazy TcpMesh (TcpMesh::Config::lazy) over real loopback sockets: Connect
// makes only the ring neighbours' connections, an exchange with any other peer connects it on
// first use (stashing the connections other peers make meanwhile), and a peer that never comes,
// or an Interrupt, ends the wait. Foreign connections: mesh_connector_test.cc. Every multi-rank
// test arms a Watchdog.
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "tests/support/loopback_mesh.h"
#include "tests/support/seconds_since.h"
#include "tests/support/watchdog.h"
#include "tests/transport/pattern_exchange.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using kolo::testing::ConnectAll;
using kolo::testing::ListenAll;
using kolo::testing::RunOnRanks;
using kolo::testing::Watchdog;
using testing::PatternExchange;
using Meshes = std::vector<std::unique_ptr<TcpMesh>>;

using kolo::testing::SecondsSince;

Meshes LazyMeshes(int n, double timeout_seconds = 10) {
  StatusOr<Meshes> meshes = kolo::testing::ConnectLoopbackMeshes(n, timeout_seconds);
  REQUIRE(meshes.status().ToString() == "OK");
  return std::move(meshes).value();
}

// Rank r sends `bytes` to partner(r) and receives from source(r), all ranks at once; returns
// each rank's failure ("" if none).
template <typename To, typename From>
std::vector<std::string> RunExchange(const Meshes& meshes, To partner, From source, size_t bytes) {
  const int n = static_cast<int>(meshes.size());
  std::vector<std::string> failures(n);
  RunOnRanks(n, [&](int r) {
    const int to = partner(r);
    const int from = source(r);
    PatternExchange exchange(r, to, bytes, bytes);
    Status status = meshes[r]->Exchange(to, from, exchange, "exchange");
    failures[r] = status.ok() ? exchange.Check(from, r) : status.ToString();
  });
  return failures;
}

TEST_CASE("A lazy mesh connects the ring neighbours at start and every other peer on first use",
          "[transport][tcp_mesh][lazy]") {
  const int n = GENERATE(2, 3, 4);
  Watchdog watchdog("lazy shifts", 30s);
  Meshes meshes = LazyMeshes(n);
  for (int r = 0; r < n; ++r) CHECK(meshes[r]->connected_peers() == std::min(n - 1, 2));
  // Every shift, so every pair exchanges; the ones not yet connected connect as they go.
  for (int step = 1; step < n; ++step) {
    for (const std::string& failure : RunExchange(
             meshes, [&](int r) { return (r + step) % n; },
             [&](int r) { return (r - step + n) % n; }, (1 << 20) + 3)) {
      CHECK(failure == "");
    }
  }
  for (int r = 0; r < n; ++r) CHECK(meshes[r]->connected_peers() == n - 1);
}

TEST_CASE("A full mesh (lazy = false) connects every pair at start and keeps working",
          "[transport][tcp_mesh][lazy]") {
  const int n = GENERATE(3, 4);
  Watchdog watchdog("full mesh", 30s);
  std::vector<std::string> addresses;
  Meshes meshes = ListenAll(n, /*timeout_seconds=*/10, &addresses, /*lazy=*/false);
  REQUIRE(meshes.size() == static_cast<size_t>(n));
  for (const Status& status : ConnectAll(meshes, addresses)) REQUIRE(status.ToString() == "OK");
  for (int r = 0; r < n; ++r) CHECK(meshes[r]->connected_peers() == n - 1);
  auto partner = [n](int r) { return (r + 2) % n; };
  auto source = [n](int r) { return (r - 2 + n) % n; };
  for (const std::string& failure : RunExchange(meshes, partner, source, 4096)) {
    CHECK(failure == "");
  }
}

TEST_CASE("Recursive-doubling partners connect on first use and only they",
          "[transport][tcp_mesh][lazy]") {
  Watchdog watchdog("lazy doubling", 30s);
  Meshes meshes = LazyMeshes(4);
  // Partners r ^ 2 (not ring neighbours at 4 ranks), then r ^ 1 (already connected).
  for (int mask : {2, 1}) {
    auto partner = [mask](int r) { return r ^ mask; };
    for (const std::string& failure : RunExchange(meshes, partner, partner, 4096)) {
      CHECK(failure == "");
    }
  }
  for (int r = 0; r < 4; ++r) CHECK(meshes[r]->connected_peers() == 3);
}

TEST_CASE("A connection another peer makes while a rank connects to a third is kept for later",
          "[transport][tcp_mesh][lazy]") {
  // Five ranks, so that rank 0 has two peers it does not connect at start (2 and 3).
  Watchdog watchdog("lazy stash", 30s);
  Meshes meshes = LazyMeshes(5);
  std::promise<void> rank3_sent;
  std::vector<std::string> failures(5);
  RunOnRanks(5, [&](int r) {
    if (r == 0) {
      // Connects to rank 2; rank 3's connection arrives first and is stashed.
      PatternExchange from2(0, 2, 0, 1000);
      Status status = meshes[0]->Exchange(-1, 2, from2, "from 2");
      failures[0] = status.ok() ? from2.Check(2, 0) : status.ToString();
      if (!failures[0].empty()) return;
      if (meshes[0]->connected_peers() != 4) {
        failures[0] = "rank 3's connection was not kept";
        return;
      }
      PatternExchange from3(0, 3, 0, 1000);
      status = meshes[0]->Exchange(-1, 3, from3, "from 3");
      failures[0] = status.ok() ? from3.Check(3, 0) : status.ToString();
    } else if (r == 3) {
      // 1000 bytes fit in the socket buffers: done once the handshake is.
      PatternExchange to0(3, 0, 1000, 0);
      Status status = meshes[3]->Exchange(0, -1, to0, "to 0");
      rank3_sent.set_value();
      failures[3] = status.ToString() == "OK" ? "" : status.ToString();
    } else if (r == 2) {
      rank3_sent.get_future().wait();
      PatternExchange to0(2, 0, 1000, 0);
      failures[2] = meshes[2]->Exchange(0, -1, to0, "to 0").ToString();
      if (failures[2] == "OK") failures[2] = "";
    }
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("An exchange with a peer that never connects fails by the timeout naming it",
          "[transport][tcp_mesh][lazy]") {
  Watchdog watchdog("lazy timeout", 30s);
  Meshes meshes = LazyMeshes(4, /*timeout_seconds=*/0.5);
  // Ranks 0 and 2 are not ring neighbours; the one that waits is alone in the exchange.
  auto wait_alone = [&](int self, int peer) {
    PatternExchange wait(self, peer, 10, 10);
    const auto start = std::chrono::steady_clock::now();
    Status status = meshes[self]->Exchange(peer, peer, wait, "allreduce 'w'");
    const double elapsed = SecondsSince(start);
    CHECK(status.code() == StatusCode::kDeadlineExceeded);
    CHECK_THAT(status.message(), Catch::StartsWith("allreduce 'w': connecting on first use"));
    CHECK(elapsed >= 0.5);
    CHECK(elapsed < 1.5);
    return status.message();
  };
  SECTION("the peer would dial us") {
    CHECK_THAT(wait_alone(0, 2), Catch::EndsWith("rank 2 never connected to this rank"));
  }
  SECTION("we would dial the peer") {
    CHECK_THAT(wait_alone(2, 0), Catch::Contains("rank 0 at 127.0.0.1:"));
  }
}

TEST_CASE("Interrupt wakes a rank waiting to connect on first use", "[transport][tcp_mesh][lazy]") {
  Watchdog watchdog("lazy interrupt", 30s);
  Meshes meshes = LazyMeshes(4, /*timeout_seconds=*/30);
  const Status why = Aborted("rank 2 lost its control stream");
  // Whether the interrupt comes before or during the wait, the exchange returns it at once.
  std::thread interrupter([&] {
    std::this_thread::sleep_for(200ms);
    meshes[0]->Interrupt(why);
  });
  const auto start = std::chrono::steady_clock::now();
  PatternExchange wait(0, 2, 10, 10);
  Status status = meshes[0]->Exchange(2, 2, wait, "allreduce");
  interrupter.join();
  CHECK(status == why);
  CHECK(SecondsSince(start) < 5.0);  // far below the 30 s timeout
}

}  // namespace
}  // namespace kolo::transport
