// Multi-rank tests of TcpMesh over real loopback sockets: N thread-ranks per test, each with
// its own mesh; failures injected by destroying a mesh, by silence, by Interrupt, and by
// foreign connections. Every multi-rank test arms a Watchdog.
#include "transport/tcp/tcp_mesh.h"

#include <catch2/catch.hpp>
#include <future>

#include "tests/support/loopback_mesh.h"
#include "tests/support/seconds_since.h"
#include "tests/support/watchdog.h"
#include "tests/transport/pattern_exchange.h"

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

Meshes ConnectedMeshes(int n, double timeout_seconds = 10) {
  std::vector<std::string> addresses;
  Meshes meshes = ListenAll(n, timeout_seconds, &addresses);
  REQUIRE(meshes.size() == static_cast<size_t>(n));
  for (const Status& status : ConnectAll(meshes, addresses)) REQUIRE(status.ToString() == "OK");
  return meshes;
}

// Each rank sends `bytes` to (rank + step) and receives from (rank - step); returns failures.
std::vector<std::string> ShiftExchange(const Meshes& meshes, int step, size_t bytes,
                                       size_t lead = PatternExchange::kNoLimit) {
  const int n = static_cast<int>(meshes.size());
  std::vector<std::string> failures(n);
  RunOnRanks(n, [&](int r) {
    const int to = (r + step) % n;
    const int from = (r - step % n + n) % n;
    PatternExchange exchange(r, to, bytes, bytes, 64 << 10, lead);
    Status status = meshes[r]->Exchange(to, from, exchange, "shift");
    failures[r] = status.ok() ? exchange.Check(from, r) : status.ToString();
  });
  return failures;
}

TEST_CASE("Ranks exchange patterned bytes around a ring", "[transport][tcp_mesh]") {
  const int n = GENERATE(2, 3, 4, 5, 6);
  const size_t bytes = GENERATE(size_t{0}, size_t{1}, size_t{(1 << 20) + 3});
  Watchdog watchdog("ring exchange", 30s);
  Meshes meshes = ConnectedMeshes(n);
  for (int r = 0; r < n; ++r) CHECK(ShiftExchange(meshes, 1, bytes)[r] == "");
}

TEST_CASE("Every rank exchanges with every other rank in shifted rounds", "[transport][tcp_mesh]") {
  const int n = GENERATE(2, 3, 5);
  Watchdog watchdog("pairwise exchange", 30s);
  Meshes meshes = ConnectedMeshes(n);
  for (int step = 1; step < n; ++step) {
    std::vector<std::string> failures = ShiftExchange(meshes, step, (1 << 20) + 3);
    for (int r = 0; r < n; ++r) CHECK(failures[r] == "");
  }
}

TEST_CASE("A ring that forwards only what it received still completes", "[transport][tcp_mesh]") {
  const int n = GENERATE(3, 4);
  Watchdog watchdog("relay ring", 30s);
  Meshes meshes = ConnectedMeshes(n);
  for (const std::string& failure : ShiftExchange(meshes, 1, (1 << 20) + 3, 4096)) {
    CHECK(failure == "");
  }
}

TEST_CASE("Two ranks exchange in both directions over one connection", "[transport][tcp_mesh]") {
  const size_t bytes = GENERATE(size_t{1}, size_t{(8 << 20) + 3});
  Watchdog watchdog("full duplex", 30s);
  Meshes meshes = ConnectedMeshes(4);
  std::vector<std::string> failures(4);
  RunOnRanks(4, [&](int r) {
    const int peer = r ^ 1;
    PatternExchange exchange(r, peer, bytes, bytes);
    Status status = meshes[r]->Exchange(peer, peer, exchange, "duplex");
    failures[r] = status.ok() ? exchange.Check(peer, r) : status.ToString();
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("One-way exchanges use -1 for the idle direction", "[transport][tcp_mesh]") {
  Watchdog watchdog("one-way exchange", 30s);
  Meshes meshes = ConnectedMeshes(2);
  std::vector<std::string> failures(2);
  RunOnRanks(2, [&](int r) {
    PatternExchange exchange(r, 1, r == 0 ? 1000 : 0, r == 1 ? 1000 : 0);
    Status status = r == 0 ? meshes[0]->Exchange(1, -1, exchange, "send only")
                           : meshes[1]->Exchange(-1, 0, exchange, "receive only");
    failures[r] = status.ok() ? exchange.Check(0, 1) : status.ToString();
  });
  CHECK(failures[0] == "");
  CHECK(failures[1] == "");
}

TEST_CASE("Invalid peers are reported as internal errors", "[transport][tcp_mesh]") {
  Watchdog watchdog("invalid peers", 30s);
  Meshes meshes = ConnectedMeshes(3);
  PatternExchange one_byte(1, 0, 1, 1);
  for (auto [to, from] :
       {std::pair{1, 0}, std::pair{0, 1}, std::pair{3, 0}, std::pair{-1, 0}, std::pair{0, -2}}) {
    Status status = meshes[1]->Exchange(to, from, one_byte, "bad peers");
    CHECK(status.code() == StatusCode::kInternal);
    CHECK_THAT(status.message(), Catch::StartsWith("bad peers: "));
  }
}

TEST_CASE("A single-rank mesh connects at once and moves nothing", "[transport][tcp_mesh]") {
  Meshes meshes = ConnectedMeshes(1);
  PatternExchange nothing(0, 0, 0, 0);
  CHECK(meshes[0]->Exchange(-1, -1, nothing, "empty").ok());
}

TEST_CASE("A peer destroyed mid-exchange fails the other side naming it", "[transport][tcp_mesh]") {
  Watchdog watchdog("peer destroyed", 30s);
  Meshes meshes = ConnectedMeshes(2, /*timeout_seconds=*/10);
  Status status;
  double elapsed = 0;
  RunOnRanks(2, [&](int r) {
    if (r == 0) {
      PatternExchange big(0, 1, 16 << 20, 16 << 20);
      const auto start = std::chrono::steady_clock::now();
      status = meshes[0]->Exchange(1, 1, big, "allreduce 'w' (1 tensor, 16 MiB)");
      elapsed = SecondsSince(start);
    } else {
      PatternExchange part(1, 0, 0, 64 << 10);  // takes a little of rank 0's stream, then dies
      Status partial = meshes[1]->Exchange(-1, 0, part, "partial");
      partial.IgnoreError();  // the test is about rank 0's view
      meshes[1].reset();
    }
  });
  CHECK(status.code() == StatusCode::kUnavailable);
  CHECK(status.message() == "allreduce 'w' (1 tensor, 16 MiB): rank 1 closed the connection");
  // A closed connection is seen at once; the bound is 1 s, asserted with a 2x margin.
  CHECK(elapsed < 2.0);
}

TEST_CASE("No data for timeout_seconds fails naming the silent rank", "[transport][tcp_mesh]") {
  Watchdog watchdog("no data timeout", 30s);
  Meshes meshes = ConnectedMeshes(2, /*timeout_seconds=*/0.5);
  SECTION("receiving") {
    PatternExchange wait(0, 1, 0, 10);
    const auto start = std::chrono::steady_clock::now();
    Status status = meshes[0]->Exchange(-1, 1, wait, "barrier");
    const double elapsed = SecondsSince(start);
    CHECK(status.code() == StatusCode::kDeadlineExceeded);
    CHECK(status.message() ==
          "barrier: no data from rank 1: timed out after 0.5 s (KOLO_TIMEOUT_SECONDS)");
    CHECK(elapsed >= 0.5);
    CHECK(elapsed < 1.0);
  }
  SECTION("sending to a rank that does not read") {
    PatternExchange flood(0, 1, 64 << 20, 0);
    const auto start = std::chrono::steady_clock::now();
    Status status = meshes[0]->Exchange(1, -1, flood, "broadcast");
    CHECK(status.code() == StatusCode::kDeadlineExceeded);
    CHECK(status.message() ==
          "broadcast: rank 1 accepted no data: timed out after 0.5 s (KOLO_TIMEOUT_SECONDS)");
    CHECK(SecondsSince(start) < 1.0 + 1.0);  // filling the socket buffers first takes a moment
  }
}

TEST_CASE("Interrupt fails the running and every later exchange", "[transport][tcp_mesh]") {
  Watchdog watchdog("interrupt", 30s);
  Meshes meshes = ConnectedMeshes(2, /*timeout_seconds=*/30);
  const Status why = Aborted("rank 3 lost its control stream");
  std::promise<void> got_first_byte;
  PatternExchange two_bytes(0, 1, 0, 2, /*chunk=*/1);
  two_bytes.set_on_received([&](size_t total) {
    if (total == 1) got_first_byte.set_value();
  });
  std::thread interrupter([&] {
    if (got_first_byte.get_future().wait_for(10s) == std::future_status::ready) {
      meshes[0]->Interrupt(why);
    }
  });
  PatternExchange one_byte(1, 0, 1, 0);
  REQUIRE(meshes[1]->Exchange(0, -1, one_byte, "first byte").ok());
  const auto start = std::chrono::steady_clock::now();
  Status status = meshes[0]->Exchange(-1, 1, two_bytes, "allreduce");
  interrupter.join();
  CHECK(status == why);
  CHECK(SecondsSince(start) < 2.0);
  PatternExchange later(0, 1, 1, 1);
  CHECK(meshes[0]->Exchange(1, 1, later, "later") == why);
}

}  // namespace
}  // namespace kolo::transport
