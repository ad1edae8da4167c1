// TcpRoundLane: the round message codec (split anywhere, bounded), and messages crossing real
// loopback connections of a TcpMesh's round lane.
#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>

#include "tests/support/loopback_mesh.h"
#include "transport/tcp/tcp_mesh.h"
#include "transport/tcp/tcp_round_lane.h"

using namespace kolo;
using namespace kolo::transport;

namespace {

RoundMessage Sample() {
  RoundMessage m;
  m.round = (uint64_t{1} << 40) + 3;
  m.received_seq = 77;
  m.fusion_threshold = (uint64_t{5} << 33) + 1;
  m.hierarchy_min_bytes = (uint64_t{3} << 35) + 9;
  m.joined = true;
  m.stopping = false;
  m.ready = {1, 2, 900000};
  m.diverted = {5};
  return m;
}

// `size` meshes with round lanes, connected over loopback.
std::vector<std::unique_ptr<TcpMesh>> ConnectedRoundLanes(int size) {
  std::vector<std::unique_ptr<TcpMesh>> meshes;
  std::vector<std::string> addresses;
  for (int r = 0; r < size; ++r) {
    TcpMesh::Config config = kolo::testing::MeshConfig(r, size);
    config.round_lane = true;
    auto mesh = TcpMesh::Listen(config);
    REQUIRE(mesh.ok());
    addresses.push_back((*mesh)->listen_address());
    meshes.push_back(std::move(mesh).value());
  }
  for (const Status& s : kolo::testing::ConnectAll(meshes, addresses)) REQUIRE(s.ok());
  return meshes;
}

}  // namespace

TEST_CASE("Round messages survive being split at every byte", "[transport][fastpath]") {
  RoundMessage second = Sample();
  second.ready.clear();
  second.stopping = true;
  second.step = 9;  // a dissemination step travels in the flags word
  second.notice = true;
  RoundMessage third = Sample();  // with eager inputs (RoundMessage::eager)
  const uint8_t data[] = {1, 2, 3, 4, 5, 6, 7, 8};
  third.eager.inputs = {{2, 3, data}, {900000, 5, data + 3}};
  third.staged = {900000, (uint64_t{7} << 40) + 3};  // with eager inputs, as the codec allows
  RoundMessage fourth = Sample();                    // staged alone (RoundMessage::staged)
  fourth.staged = {2, 11};
  const std::string bytes = EncodeRoundMessage(Sample()) + EncodeRoundMessage(second) +
                            EncodeRoundMessage(third) + EncodeRoundMessage(fourth);
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    RoundStreamParser parser;
    REQUIRE(parser.Feed(bytes.data(), cut).ok());
    REQUIRE(parser.Feed(bytes.data() + cut, bytes.size() - cut).ok());
    std::vector<RoundMessage> out;
    parser.Take(&out);
    REQUIRE(out.size() == 4);
    CHECK(out[0] == Sample());
    CHECK(out[1] == second);
    CHECK(out[2] == third);
    CHECK(out[3] == fourth);
    CHECK(out[3].staged.exchange == 11);
  }
  // A parsed message owns its inputs; a copy of it points into its own.
  RoundStreamParser parser;
  const std::string one = EncodeRoundMessage(third);
  REQUIRE(parser.Feed(one.data(), one.size()).ok());
  std::vector<RoundMessage> out;
  parser.Take(&out);
  REQUIRE(out.size() == 1);
  const RoundMessage copy = out[0];
  out.clear();
  const RoundEager::Input* input = copy.eager.Find(900000);
  REQUIRE(input != nullptr);
  CHECK(input->bytes == 5);
  CHECK(input->data == copy.eager.owned.data() + 16);  // each at a multiple of 16 bytes
  CHECK(input->data[0] == 4);
  CHECK(copy.eager.Find(1) == nullptr);
}

TEST_CASE("Malformed round messages are refused before anything is allocated",
          "[transport][fastpath]") {
  std::string bytes = EncodeRoundMessage(Sample());
  SECTION("wrong magic") {
    bytes[0] = 'X';
    RoundStreamParser parser;
    CHECK_THAT(parser.Feed(bytes.data(), bytes.size()).message(), Catch::Contains("wrong magic"));
  }
  SECTION("a count beyond the cache's bound, refused with only the header in") {
    bytes[kRoundHeaderBytes - 8] = '\x7f';  // ready count 0x7f000003
    RoundStreamParser parser;
    Status s = parser.Feed(bytes.data(), kRoundHeaderBytes);
    CHECK_THAT(s.message(), Catch::Contains("more than 1000000"));
    CHECK_FALSE(parser.Feed("x", 1).ok());  // stays failed
  }
  SECTION("eager inputs whose sizes do not add up, or out of order") {
    RoundMessage m = Sample();
    const uint8_t zeros[8] = {};
    m.eager.inputs = {{1, 3, zeros}, {2, 5, zeros + 3}};
    std::string eager = EncodeRoundMessage(m);
    const size_t at = kRoundHeaderBytes + 4 * (m.ready.size() + m.diverted.size());
    eager[at + 8 + 15] = 6;  // the second size: 3 + 6 != 8
    RoundStreamParser parser;
    CHECK_THAT(parser.Feed(eager.data(), eager.size()).message(),
               Catch::Contains("add up to 9 bytes, not the 8"));
    eager[at + 8 + 15] = 5;
    eager[at + 8 + 11] = 1;  // the second id: 1 after 1
    RoundStreamParser again;
    CHECK_THAT(again.Feed(eager.data(), eager.size()).message(),
               Catch::Contains("eager cache ids out of order"));
    eager[at + 4] = '\x7f';  // the eager bytes: beyond the bound, refused before the data is in
    RoundStreamParser big;
    CHECK_THAT(big.Feed(eager.data(), at + 8).message(), Catch::Contains("more than 1048576"));
  }
  SECTION("a staged id of 0") {
    RoundMessage m = Sample();
    m.staged = {1, 5};
    std::string staged = EncodeRoundMessage(m);
    const size_t at = kRoundHeaderBytes + 4 * (m.ready.size() + m.diverted.size());
    staged[at + 3] = 0;  // the id's lowest byte
    RoundStreamParser parser;
    CHECK_THAT(parser.Feed(staged.data(), staged.size()).message(),
               Catch::Contains("stages cache id 0"));
  }
  SECTION("unknown flags") {
    bytes[kRoundHeaderBytes - 9] = '\x08';  // the flags' lowest byte
    RoundStreamParser parser;
    CHECK_THAT(parser.Feed(bytes.data(), bytes.size()).message(),
               Catch::Contains("unknown flags 8"));
  }
}

TEST_CASE("Three ranks exchange round messages over the mesh's round connections",
          "[transport][fastpath]") {
  constexpr int kSize = 3;
  std::vector<std::unique_ptr<TcpMesh>> meshes = ConnectedRoundLanes(kSize);
  std::vector<std::unique_ptr<TcpRoundLane>> lanes;
  for (int r = 0; r < kSize; ++r) {
    lanes.push_back(std::make_unique<TcpRoundLane>(r, meshes[r]->TakeRoundConnections(),
                                                   MakeLogger(r, "test", spdlog::level::warn)));
    CHECK(lanes[r]->fds().size() == kSize - 1);
  }
  for (int r = 0; r < kSize; ++r) {
    RoundMessage m = Sample();
    m.received_seq = static_cast<uint64_t>(r);
    REQUIRE(lanes[r]->SendToAll(m).ok());
  }
  for (int r = 0; r < kSize; ++r) {
    std::vector<std::pair<int, RoundMessage>> got;
    std::vector<int> closed;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.size() < kSize - 1 && std::chrono::steady_clock::now() < until) {
      REQUIRE(lanes[r]->Poll(&got, &closed).ok());
    }
    REQUIRE(got.size() == kSize - 1);
    for (const auto& [from, m] : got) {
      CHECK(from != r);
      CHECK(m.received_seq == static_cast<uint64_t>(from));  // the message came from `from`
    }
  }
  // A rank that leaves is reported once as closed.
  lanes[2].reset();
  std::vector<std::pair<int, RoundMessage>> got;
  std::vector<int> closed;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (closed.empty() && std::chrono::steady_clock::now() < until) {
    REQUIRE(lanes[0]->Poll(&got, &closed).ok());
  }
  CHECK(closed == std::vector<int>{2});
  CHECK(lanes[0]->fds().size() == 1);
}

TEST_CASE("Twelve ranks connect rounds only to their dissemination peers, one per step",
          "[transport][fastpath]") {
  constexpr int kSize = 12;  // 4 steps: at most 8 round connections a rank instead of 11
  REQUIRE(RoundPatternFor(kSize) == RoundPattern::kDissemination);
  std::vector<std::unique_ptr<TcpMesh>> meshes = ConnectedRoundLanes(kSize);
  const int steps = RoundSteps(kSize);
  std::vector<std::unique_ptr<TcpRoundLane>> lanes;
  for (int r = 0; r < kSize; ++r) {
    std::vector<UniqueFd> connections = meshes[r]->TakeRoundConnections();
    const std::vector<int> peers = RoundPeersOf(r, kSize);
    for (int q = 0; q < kSize; ++q) {
      INFO("rank " << r << ", peer " << q);
      CHECK(connections[q].valid() == std::binary_search(peers.begin(), peers.end(), q));
    }
    lanes.push_back(std::make_unique<TcpRoundLane>(r, std::move(connections),
                                                   MakeLogger(r, "test", spdlog::level::warn)));
    CHECK(lanes[r]->fds().size() == peers.size());
    CHECK(peers.size() <= static_cast<size_t>(2 * steps));
  }
  // A send to a rank outside the pattern is a bug, named.
  const std::vector<int> peers0 = RoundPeersOf(0, kSize);
  for (int q = 1; q < kSize; ++q) {
    if (std::binary_search(peers0.begin(), peers0.end(), q)) continue;
    const Status s = lanes[0]->SendTo(q, Sample());
    CHECK(s.code() == StatusCode::kInternal);
    CHECK_THAT(s.message(),
               Catch::Contains("rank 0 has no round connection to rank " + std::to_string(q)));
  }
  for (int r = 0; r < kSize; ++r) {
    for (int step = 0; step < steps; ++step) {
      RoundMessage m = Sample();
      m.received_seq = static_cast<uint64_t>(r);
      m.step = static_cast<uint32_t>(step);
      REQUIRE(lanes[r]->SendTo(RoundSendPeer(r, kSize, step), m).ok());
    }
  }
  for (int r = 0; r < kSize; ++r) {
    std::vector<std::pair<int, RoundMessage>> got;
    std::vector<int> closed;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.size() < static_cast<size_t>(steps) && std::chrono::steady_clock::now() < until) {
      REQUIRE(lanes[r]->Poll(&got, &closed).ok());
    }
    REQUIRE(got.size() == static_cast<size_t>(steps));
    CHECK(closed.empty());
    for (const auto& [from, m] : got) {
      CHECK(from == RoundReceivePeer(r, kSize, static_cast<int>(m.step)));
      CHECK(m.received_seq == static_cast<uint64_t>(from));
    }
  }
}

TEST_CASE("Ranks that disagree on KOLO_FAST_PATH fail to connect, naming the rank",
          "[transport][fastpath]") {
  std::vector<std::unique_ptr<TcpMesh>> meshes;
  std::vector<std::string> addresses;
  for (int r = 0; r < 2; ++r) {
    TcpMesh::Config config = kolo::testing::MeshConfig(r, 2);
    config.round_lane = r == 0;
    auto mesh = TcpMesh::Listen(config);
    REQUIRE(mesh.ok());
    addresses.push_back((*mesh)->listen_address());
    meshes.push_back(std::move(mesh).value());
  }
  std::vector<Status> results = kolo::testing::ConnectAll(meshes, addresses);
  CHECK(results[0].code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(results[0].message(),
             Catch::Contains("rank 1 runs with KOLO_FAST_PATH=0, this rank with KOLO_FAST_PATH=1"));
  CHECK_THAT(results[1].message(),
             Catch::Contains("rank 0 runs with KOLO_FAST_PATH=1, this rank with KOLO_FAST_PATH=0"));
}
