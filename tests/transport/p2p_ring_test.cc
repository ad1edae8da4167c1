// The shared-memory rings of point-to-point (transport/p2p/p2p_ring.h) on real segments: the byte
// stream across the wrap-around, a full ring and the writer's request for room, the sleeping
// reader's doorbell, a corrupt ring; and their set-up at lane start (p2p_ring_setup.h) over real
// socket pairs between threads: who gets rings, who does not, a peer that hangs up; and lanes
// whose peers are reached some by rings, some by sockets alone.
#include "transport/p2p/p2p_ring.h"

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "tests/support/watchdog.h"
#include "transport/p2p/p2p_lane.h"
#include "transport/p2p/p2p_ring_setup.h"
#include "transport/unique_fd.h"

using namespace kolo;
using namespace kolo::transport;

namespace {

struct Pair {
  P2pRingShared* shared = nullptr;  // the segment's two rings
  std::unique_ptr<P2pRing> lower;
  std::unique_ptr<P2pRing> higher;
};

Pair MakePair() {
  Pair pair;
  auto created = ShmSegment::Create(FreshShmName(), P2pRing::kSegmentBytes);
  REQUIRE(created.ok());
  auto opened = ShmSegment::Open((*created)->name(), P2pRing::kSegmentBytes);
  REQUIRE(opened.ok());
  (*created)->Unlink();
  pair.shared = reinterpret_cast<P2pRingShared*>((*created)->data());
  pair.lower = std::make_unique<P2pRing>(std::move(*created), true);
  pair.higher = std::make_unique<P2pRing>(std::move(*opened), false);
  return pair;
}

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + i / 251);
  return v;
}

}  // namespace

TEST_CASE("A p2p ring carries a byte stream across its wrap-around, both ways", "[p2p][ring]") {
  Pair pair = MakePair();
  for (bool down : {true, false}) {
    P2pRing& writer = down ? *pair.lower : *pair.higher;
    P2pRing& reader = down ? *pair.higher : *pair.lower;
    const std::vector<uint8_t> sent = Pattern(5 * kP2pRingBytes + 123, down ? 1 : 2);
    std::vector<uint8_t> got;
    size_t put = 0;
    while (got.size() < sent.size()) {
      put += writer.Write(sent.data() + put, std::min<size_t>(1000, sent.size() - put));
      CHECK_FALSE(writer.Publish());  // nobody sleeps
      uint8_t buffer[777];
      StatusOr<size_t> n = reader.Take(buffer, sizeof(buffer));
      REQUIRE(n.ok());
      got.insert(got.end(), buffer, buffer + *n);
    }
    CHECK(got == sent);
    CHECK_FALSE(reader.HasData());
  }
}

TEST_CASE("A full p2p ring takes nothing more until its reader made room, and says so",
          "[p2p][ring]") {
  Pair pair = MakePair();
  const std::vector<uint8_t> bytes = Pattern(kP2pRingBytes + 100, 3);
  REQUIRE(pair.lower->Write(bytes.data(), bytes.size()) == kP2pRingBytes);
  CHECK(pair.lower->Write(bytes.data(), 1) == 0);
  pair.lower->Publish();
  CHECK_FALSE(pair.lower->AskForRoom());  // full: the flag stays for the reader
  CHECK(pair.shared[0].writer_waits == 1);
  std::vector<uint8_t> out(100);
  REQUIRE(*pair.higher->Take(out.data(), out.size()) == 100);
  CHECK(pair.higher->WriterWaited());        // ring the writer: room was made
  CHECK_FALSE(pair.higher->WriterWaited());  // once
  CHECK(pair.lower->AskForRoom());           // room now: the request is withdrawn at once
  CHECK(pair.shared[0].writer_waits == 0);
  CHECK(pair.lower->Write(bytes.data(), 1000) == 100);
}

TEST_CASE("A p2p ring's writer rings a sleeping reader once per sleep", "[p2p][ring]") {
  Pair pair = MakePair();
  const uint8_t byte = 9;
  pair.higher->SetSleeping(true);
  REQUIRE(pair.lower->Write(&byte, 1) == 1);
  CHECK(pair.lower->Publish());  // the reader sleeps: ring it
  CHECK(pair.shared[0].reader_sleeps == 0);
  REQUIRE(pair.lower->Write(&byte, 1) == 1);
  CHECK_FALSE(pair.lower->Publish());  // rung already
  pair.higher->SetSleeping(false);
  CHECK(pair.higher->HasData());
}

TEST_CASE("A p2p ring that holds more than it can is a protocol error", "[p2p][ring]") {
  Pair pair = MakePair();
  __atomic_store_n(&pair.shared[0].tail, 2 * kP2pRingBytes, __ATOMIC_SEQ_CST);
  uint8_t out[16];
  StatusOr<size_t> taken = pair.higher->Take(out, sizeof(out));
  REQUIRE_FALSE(taken.ok());
  CHECK_THAT(taken.status().message(), Catch::Contains("more than its 32768"));
}

namespace {

// `size` ranks on threads, a non-blocking socket pair between every two; runs
// ConnectP2pRings on each with `enabled[rank]`.
std::vector<std::vector<UniqueFd>> SocketPairs(int size) {
  std::vector<std::vector<UniqueFd>> fds(size);
  for (auto& row : fds) row.resize(size);
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) {
      int sv[2];
      REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
      fds[a][b] = UniqueFd(sv[0]);
      fds[b][a] = UniqueFd(sv[1]);
    }
  }
  return fds;
}

std::vector<StatusOr<std::vector<std::unique_ptr<P2pRing>>>> ConnectAll(
    int size, const std::vector<bool>& enabled, int hang_up = -1) {
  std::vector<std::vector<UniqueFd>> fds = SocketPairs(size);
  std::vector<StatusOr<std::vector<std::unique_ptr<P2pRing>>>> results;
  for (int r = 0; r < size; ++r) results.emplace_back(Unavailable("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      if (r == hang_up) {
        for (auto& fd : fds[r]) fd = UniqueFd();
        return;
      }
      std::vector<int> raw(size, -1);
      for (int p = 0; p < size; ++p) raw[p] = fds[r][p].get();
      results[r] = ConnectP2pRings(r, std::vector<bool>(size, true), enabled[r], raw, 5,
                                   MakeLogger(r, "p2p", spdlog::level::off));
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace

TEST_CASE("Same-host p2p pairs agree on rings at start; a pair with a rank that says no has none",
          "[p2p][ring]") {
  kolo::testing::Watchdog watchdog("p2p ring set-up", std::chrono::seconds(30));
  auto results = ConnectAll(3, {true, true, false});
  for (int r = 0; r < 3; ++r) REQUIRE(results[r].ok());
  auto& rings = results;
  CHECK((*rings[0])[1] != nullptr);
  CHECK((*rings[1])[0] != nullptr);
  for (int r : {0, 1}) CHECK((*rings[r])[2] == nullptr);
  for (int p : {0, 1}) CHECK((*rings[2])[p] == nullptr);
  // Ranks 0 and 1 share one segment: what one writes the other reads.
  const uint8_t hello[] = {1, 2, 3};
  REQUIRE((*rings[0])[1]->Write(hello, 3) == 3);
  (*rings[0])[1]->Publish();
  uint8_t got[3] = {};
  REQUIRE(*(*rings[1])[0]->Take(got, 3) == 3);
  CHECK(got[2] == 3);
  REQUIRE((*rings[1])[0]->Write(hello, 2) == 2);
  (*rings[1])[0]->Publish();
  CHECK(*(*rings[0])[1]->Take(got, 3) == 2);
}

TEST_CASE("A peer that hangs up during the p2p ring set-up fails it naming the peer",
          "[p2p][ring]") {
  kolo::testing::Watchdog watchdog("p2p ring set-up, a peer gone", std::chrono::seconds(30));
  const auto start = std::chrono::steady_clock::now();
  auto results = ConnectAll(2, {true, true}, /*hang_up=*/1);
  REQUIRE_FALSE(results[0].ok());
  CHECK_THAT(results[0].status().message(), Catch::Contains("with rank 1"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(4));
}

namespace {

std::shared_ptr<P2pRequest> Request(bool send, int peer, int64_t* value, int* source,
                                    std::promise<Status>* done) {
  auto r = std::make_shared<P2pRequest>();
  r->is_send = send;
  r->peer = peer;
  r->tag = 5;
  r->data = value;
  r->bytes = sizeof(*value);
  r->dtype = DataType::kInt64;
  r->what = send ? "send" : "recv";
  r->source = source;
  r->done = [done](const Status& s) { done->set_value(s); };
  r->done_anywhere = true;
  r->timeout_seconds = 20;
  return r;
}

}  // namespace

TEST_CASE("A recv from any rank takes sends that came by a ring and by a socket, in order",
          "[p2p][ring]") {
  kolo::testing::Watchdog watchdog("p2p any source, ring and socket", std::chrono::seconds(60));
  constexpr int kSize = 3;
  constexpr int kEach = 40;
  std::vector<std::vector<UniqueFd>> fds = SocketPairs(kSize);
  std::vector<std::unique_ptr<P2pLane>> lanes(kSize);
  std::vector<std::thread> starts;
  for (int r = 0; r < kSize; ++r) {
    starts.emplace_back([&, r] {
      P2pLane::Config config;
      config.rank = r;
      config.size = kSize;
      config.same_host.assign(kSize, true);
      config.rings = r != 2;  // rank 2 is reached over its socket alone
      config.start_timeout_seconds = 10;
      auto lane = P2pLane::Start(config, std::move(fds[r]));
      if (lane.ok()) lanes[r] = std::move(*lane);
    });
  }
  for (auto& t : starts) t.join();
  for (const auto& lane : lanes) REQUIRE(lane != nullptr);
  // Rank 0 posts every receive (any rank) first; ranks 1 and 2 then send 40 values each.
  std::vector<int64_t> got(2 * kEach, -1);
  std::vector<int> sources(2 * kEach, -1);
  std::vector<std::promise<Status>> recvs(2 * kEach);
  for (int i = 0; i < 2 * kEach; ++i) {
    REQUIRE(lanes[0]->Post(Request(false, -1, &got[i], &sources[i], &recvs[i])).ok());
  }
  std::vector<int64_t> values(2 * kEach);
  std::vector<std::promise<Status>> sends(2 * kEach);
  for (int i = 0; i < kEach; ++i) {
    for (int sender : {1, 2}) {
      const int k = (sender - 1) * kEach + i;
      values[k] = sender * 1000 + i;
      REQUIRE(lanes[sender]->Post(Request(true, 0, &values[k], nullptr, &sends[k])).ok());
    }
  }
  for (auto& done : sends) {
    auto f = done.get_future();
    REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
    CHECK(f.get().ok());
  }
  std::vector<int64_t> next = {0, 0, 0};  // per sender, the value expected next
  for (int i = 0; i < 2 * kEach; ++i) {
    auto f = recvs[i].get_future();
    REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
    REQUIRE(f.get().ok());
    const int from = sources[i];
    REQUIRE((from == 1 || from == 2));
    CHECK(got[i] == from * 1000 + next[from]);  // FIFO per sender
    ++next[from];
  }
  CHECK(next[1] == kEach);
  CHECK(next[2] == kEach);
  for (auto& lane : lanes) lane->Stop(ShutdownError("test over"));
}
