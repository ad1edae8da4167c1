// ShmRoundLane (transport/shm/shm_round_lane.h) over a real ShmMesh segment and real loopback
// round connections, thread-ranks: messages arrive whole and in order, larger ones than a
// ring too (the sender is rung when room is made); a peer is rung only while it is armed; a
// peer that leaves is reported closed after its last message; a ring written by something
// other than the protocol is an error naming the sender; a sender reads the ring's head only
// when the room it saw last is too small.
#include "transport/shm/shm_round_lane.h"

#include <poll.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/loopback_mesh.h"
#include "tests/support/watchdog.h"
#include "transport/shm/shm_mesh.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using Received = std::vector<std::pair<int, RoundMessage>>;

struct Lanes {
  std::vector<std::unique_ptr<TcpMesh>> meshes;
  std::vector<std::unique_ptr<ShmMesh>> planes;
  std::vector<std::unique_ptr<ShmRoundLane>> lanes;
};

Lanes MakeLanes(int n) {
  Lanes l;
  std::vector<std::string> addresses;
  for (int r = 0; r < n; ++r) {
    TcpMesh::Config config = kolo::testing::MeshConfig(r, n);
    config.round_lane = true;
    auto mesh = TcpMesh::Listen(config);
    REQUIRE(mesh.ok());
    addresses.push_back((*mesh)->listen_address());
    l.meshes.push_back(std::move(mesh).value());
  }
  for (const Status& s : kolo::testing::ConnectAll(l.meshes, addresses)) REQUIRE(s.ok());
  l.planes.resize(n);
  std::vector<std::string> errors(n);
  kolo::testing::RunOnRanks(n, [&](int r) {
    ShmMesh::Config config;
    config.rank = r;
    config.size = n;
    config.slot_bytes = 4096;
    StatusOr<std::unique_ptr<ShmMesh>> plane = ShmMesh::Create(config, *l.meshes[r]);
    if (plane.ok()) {
      l.planes[r] = std::move(plane).value();
    } else {
      errors[r] = plane.status().ToString();
    }
  });
  for (const std::string& e : errors) REQUIRE(e.empty());
  for (int r = 0; r < n; ++r) {
    l.lanes.push_back(std::make_unique<ShmRoundLane>(r, l.meshes[r]->TakeRoundConnections(),
                                                     l.planes[r]->round_area(),
                                                     MakeLogger(r, "test", spdlog::level::warn)));
  }
  return l;
}

RoundMessage Message(uint64_t round, uint64_t seq, uint32_t ids = 2) {
  RoundMessage m;
  m.round = round;
  m.received_seq = seq;
  m.fusion_threshold = 64 << 20;
  for (uint32_t i = 0; i < ids; ++i) m.ready.push_back(3 * i + 1);
  m.diverted = {7};
  return m;
}

// Polls `lane` until `want` messages arrived (or `closed` is non-empty, if `until_closed`),
// for at most 10 s.
Received PollFor(ShmRoundLane& lane, size_t want, std::vector<int>* closed = nullptr) {
  Received got;
  std::vector<int> ignored;
  std::vector<int>* c = closed != nullptr ? closed : &ignored;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < until) {
    Status s = lane.Poll(&got, c);
    REQUIRE(s.ToString() == "OK");
    if (got.size() >= want && (closed == nullptr || !closed->empty())) break;
  }
  return got;
}

// Whether one of `fds` becomes readable within `wait`.
bool Readable(const std::vector<int>& fds, std::chrono::milliseconds wait) {
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back(pollfd{fd, POLLIN, 0});
  return ::poll(p.data(), p.size(), static_cast<int>(wait.count())) > 0;
}

}  // namespace

TEST_CASE("Round messages cross the shared-memory lane whole and in order",
          "[transport][shm][fastpath]") {
  kolo::testing::Watchdog watchdog("shm round lane, 3 ranks", 60s);
  Lanes l = MakeLanes(3);
  for (int r = 0; r < 3; ++r) {
    for (uint64_t k = 1; k <= 5; ++k) REQUIRE(l.lanes[r]->SendToAll(Message(k, 10 * r + k)).ok());
  }
  for (int r = 0; r < 3; ++r) {
    Received got = PollFor(*l.lanes[r], 10);
    REQUIRE(got.size() == 10);
    uint64_t next[3] = {1, 1, 1};
    for (const auto& [from, m] : got) {
      CHECK(from != r);
      CHECK(m == Message(next[from], 10 * from + next[from]));
      ++next[from];
    }
  }
}

TEST_CASE("Nine ranks' dissemination steps cross the lane to their peers, and ring sleepers",
          "[transport][shm][fastpath]") {
  kolo::testing::Watchdog watchdog("shm round lane, 9 ranks", 60s);
  constexpr int kSize = 9;  // 4 steps; each rank has round connections to its pattern's peers
  REQUIRE(RoundPatternFor(kSize) == RoundPattern::kDissemination);
  Lanes l = MakeLanes(kSize);
  const int steps = RoundSteps(kSize);
  for (int r = 0; r < kSize; ++r) {
    CHECK(l.lanes[r]->fds().size() == RoundPeersOf(r, kSize).size());
  }
  REQUIRE(l.lanes[0]->Arm());  // rank 0 sleeps: its step senders ring it
  for (int r = 1; r < kSize; ++r) {
    for (int step = 0; step < steps; ++step) {
      if (RoundSendPeer(r, kSize, step) != 0) continue;
      RoundMessage m = Message(1, static_cast<uint64_t>(r));
      m.step = static_cast<uint32_t>(step);
      REQUIRE(l.lanes[r]->SendTo(0, m).ok());
    }
  }
  CHECK(Readable(l.lanes[0]->fds(), 5s));
  l.lanes[0]->Woken();
  Received got = PollFor(*l.lanes[0], static_cast<size_t>(steps));
  REQUIRE(got.size() == static_cast<size_t>(steps));
  for (const auto& [from, m] : got) {
    CHECK(from == RoundReceivePeer(0, kSize, static_cast<int>(m.step)));
    CHECK(m.received_seq == static_cast<uint64_t>(from));
  }
  CHECK(l.lanes[1]->SendTo(4, Message(1, 1)).code() == StatusCode::kInternal);  // not a peer
}

TEST_CASE("A message larger than a ring reaches a sleeping peer: each side rings the other",
          "[transport][shm][fastpath]") {
  kolo::testing::Watchdog watchdog("shm round lane, large message", 60s);
  Lanes l = MakeLanes(2);
  // 3 rings' worth of ids (plus the header): the sender keeps what does not fit.
  const RoundMessage big = Message(1, 1, 3 * kShmRoundRingBytes / 4);
  REQUIRE(l.lanes[1]->Arm());
  REQUIRE(l.lanes[0]->SendToAll(big).ok());
  Received got;
  Received sink;
  std::vector<int> closed;
  const auto until = std::chrono::steady_clock::now() + 10s;
  // Like two background loops: each waits on its connections once armed, then polls; a wait
  // that times out means a doorbell was not rung.
  while (std::chrono::steady_clock::now() < until) {
    if (l.lanes[1]->Arm()) REQUIRE(Readable(l.lanes[1]->fds(), 2000ms));
    REQUIRE(l.lanes[1]->Poll(&got, &closed).ok());
    if (!got.empty()) break;
    if (l.lanes[0]->Arm()) REQUIRE(Readable(l.lanes[0]->fds(), 2000ms));
    REQUIRE(l.lanes[0]->Poll(&sink, &closed).ok());
  }
  REQUIRE(got.size() == 1);
  CHECK(got[0].first == 0);
  CHECK(got[0].second == big);
  CHECK(closed.empty());
}

TEST_CASE("A polling peer is not rung; an armed one is, and Arm sees what is in already",
          "[transport][shm][fastpath]") {
  kolo::testing::Watchdog watchdog("shm round lane, doorbells", 60s);
  Lanes l = MakeLanes(2);
  ShmRoundLane& sender = *l.lanes[0];
  ShmRoundLane& receiver = *l.lanes[1];
  Received got;
  std::vector<int> closed;
  REQUIRE(receiver.Poll(&got, &closed).ok());  // polling: not armed
  REQUIRE(sender.SendToAll(Message(1, 1)).ok());
  CHECK_FALSE(Readable(receiver.fds(), 100ms));
  CHECK_FALSE(receiver.Arm());  // the message is in: do not sleep
  got = PollFor(receiver, 1);
  CHECK(got.size() == 1);

  REQUIRE(receiver.Arm());
  REQUIRE(sender.SendToAll(Message(2, 2)).ok());
  CHECK(Readable(receiver.fds(), 5000ms));
  got = PollFor(receiver, 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].second == Message(2, 2));
  CHECK_FALSE(Readable(receiver.fds(), 0ms));  // the doorbell was read with it
}

TEST_CASE("A peer that leaves is reported closed after its last message",
          "[transport][shm][fastpath]") {
  kolo::testing::Watchdog watchdog("shm round lane, closed peer", 60s);
  Lanes l = MakeLanes(3);
  REQUIRE(l.lanes[2]->SendToAll(Message(1, 42)).ok());
  l.lanes[2].reset();  // closes its round connections
  std::vector<int> closed;
  Received got = PollFor(*l.lanes[0], 1, &closed);
  REQUIRE(got.size() == 1);
  CHECK(got[0].first == 2);
  CHECK(got[0].second == Message(1, 42));
  CHECK(closed == std::vector<int>{2});
  CHECK(l.lanes[0]->fds().size() == 1);
  // Reported once; the other peer still talks.
  REQUIRE(l.lanes[1]->SendToAll(Message(1, 7)).ok());
  closed.clear();
  got = PollFor(*l.lanes[0], 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].first == 1);
}

TEST_CASE("A sender reads the ring's head only when the room it saw last is too small",
          "[transport][shm][fastpath]") {
  auto ring = std::make_unique<ShmRoundRing>();
  uint64_t tail = 0;
  uint64_t seen_head = 0;
  uint64_t head = 0;
  const std::string a(3000, 'a');
  const std::string b(4000, 'b');
  REQUIRE(RingWrite(ring.get(), &tail, a.data(), a.size(), &seen_head) == a.size());
  // Nothing taken out yet: the ring has room for 1096 bytes, and a sender never writes more,
  // whatever head it saw.
  CHECK(RingWrite(ring.get(), &tail, b.data(), 3000, &seen_head) == kShmRoundRingBytes - 3000);
  std::string got(kShmRoundRingBytes, '\0');
  REQUIRE(*RingRead(ring.get(), &head, got.data(), got.size()) == kShmRoundRingBytes);
  CHECK(got == a + b.substr(0, kShmRoundRingBytes - 3000));
  // The reader freed the ring; a small message fits the room this sender saw last, so it does
  // not read the head (the line the reader writes) ...
  seen_head = tail - 100;
  REQUIRE(RingWrite(ring.get(), &tail, a.data(), 50, &seen_head) == 50);
  CHECK(seen_head == tail - 150);
  // ... and one larger than that room reads it, finds the ring empty and goes in whole.
  REQUIRE(RingWrite(ring.get(), &tail, b.data(), b.size(), &seen_head) == b.size());
  CHECK(seen_head == kShmRoundRingBytes);
  REQUIRE(*RingRead(ring.get(), &head, got.data(), got.size()) == 4050);
  CHECK(got.substr(0, 4050) == a.substr(0, 50) + b);
}

TEST_CASE("A ring that does not hold this protocol is an error naming the sender",
          "[transport][shm][fastpath]") {
  kolo::testing::Watchdog watchdog("shm round lane, damaged ring", 60s);
  Lanes l = MakeLanes(2);
  ShmRoundRing* ring = l.planes[0]->round_area().ring(1, 0);
  Received got;
  std::vector<int> closed;
  SECTION("bytes that are not a round message") {
    uint64_t tail = 0;
    const std::string junk(64, 'x');
    REQUIRE(RingWrite(ring, &tail, junk.data(), junk.size()) == junk.size());
    Status s = l.lanes[0]->Poll(&got, &closed);
    CHECK_THAT(s.message(), Catch::Contains("fast path: from rank 1") &&
                                Catch::Contains("not a kolo round message (wrong magic)"));
  }
  SECTION("a tail more than a ring ahead") {
    __atomic_store_n(&ring->tail, uint64_t{1} << 40, __ATOMIC_SEQ_CST);
    Status s = l.lanes[0]->Poll(&got, &closed);
    CHECK_THAT(s.message(), Catch::Contains("fast path: from rank 1") &&
                                Catch::Contains("round ring holds 1099511627776 bytes"));
  }
  CHECK(got.empty());
}

}  // namespace kolo::transport
