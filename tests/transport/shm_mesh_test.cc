// Tests of transport/shm/shm_mesh.h and shm_segment.h with 1..4 thread-ranks bootstrapped over
// real loopback TCP meshes: the segment's name is gone from /dev/shm once every rank has it
// mapped, slots written before a Sync are seen by every rank after it, a rank that never
// arrives fails the others within the deadline naming it, and Interrupt ends a waiting Sync.
// Single copy: on where every rank may (and, unless required, has a core), off by configuration
// or (a real seccomp filter on one rank's thread) where one may not, or Create fails naming it
// with KOLO_SHM_SINGLE_COPY=on;
// ranks read and write each other's memory, publishing addresses on their boards; nobody
// writes into a rank that failed; an unmapped address fails the reader naming the rank.
#include "transport/shm/shm_mesh.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/cross_memory_attach.h"
#include "tests/support/loopback_mesh.h"
#include "tests/support/watchdog.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using kolo::testing::ConnectAll;
using kolo::testing::ListenAll;
using kolo::testing::RunOnRanks;

struct Planes {
  std::vector<std::unique_ptr<TcpMesh>> meshes;
  std::vector<std::unique_ptr<ShmMesh>> planes;
  std::vector<std::string> errors;  // "" where Create succeeded
};

// `adjust(rank, config)` runs on the rank's thread before its Create.
Planes MakePlanes(int n, double timeout_seconds, size_t slot_bytes = 4096,
                  const std::function<void(int, ShmMesh::Config&)>& adjust = {}) {
  Planes p;
  std::vector<std::string> addresses;
  p.meshes = ListenAll(n, 10, &addresses);
  for (const Status& s : ConnectAll(p.meshes, addresses)) REQUIRE(s.ToString() == "OK");
  p.planes.resize(n);
  p.errors.resize(n);
  RunOnRanks(n, [&](int r) {
    ShmMesh::Config config;
    config.rank = r;
    config.size = n;
    config.slot_bytes = slot_bytes;
    config.timeout_seconds = timeout_seconds;
    if (adjust) adjust(r, config);
    StatusOr<std::unique_ptr<ShmMesh>> plane = ShmMesh::Create(config, *p.meshes[r]);
    if (plane.ok()) {
      p.planes[r] = std::move(plane).value();
    } else {
      p.errors[r] = plane.status().ToString();
    }
  });
  return p;
}

bool ShmNameExists(const std::string& name) {
  return access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

TEST_CASE("ranks share slots through a segment whose name is already gone", "[transport][shm]") {
  const int n = GENERATE(range(1, 5));
  kolo::testing::Watchdog watchdog("shm plane of " + std::to_string(n) + " ranks", 30s);
  Planes p = MakePlanes(n, 10);
  for (const std::string& e : p.errors) REQUIRE(e == "");
  const std::string name = p.planes[0]->segment_name();
  CHECK(name.rfind("/kolo-" + std::to_string(getpid()) + "-", 0) == 0);
  CHECK_FALSE(ShmNameExists(name));
  for (int r = 0; r < n; ++r) {
    CHECK(p.planes[r]->segment_name() == name);
    CHECK(p.planes[r]->slot_bytes() == 4096);
  }

  std::vector<std::string> failures(n);
  RunOnRanks(n, [&](int r) {
    ShmMesh& plane = *p.planes[r];
    for (int round = 0; round < 50 && failures[r].empty(); ++round) {
      const int set = round % SharedMemoryPlane::kSlotSets;
      std::fill_n(plane.slot(set, r), plane.slot_bytes(), static_cast<uint8_t>(round * 7 + r));
      Status synced = plane.Sync("round " + std::to_string(round));
      if (!synced.ok()) {
        failures[r] = synced.ToString();
        break;
      }
      for (int owner = 0; owner < n; ++owner) {
        const uint8_t want = static_cast<uint8_t>(round * 7 + owner);
        const uint8_t* slot = plane.slot(set, owner);
        if (slot[0] != want || slot[plane.slot_bytes() - 1] != want) {
          failures[r] = "round " + std::to_string(round) + ": slot of rank " +
                        std::to_string(owner) + " holds another round's bytes";
        }
      }
      // Nobody refills this set before everyone has read it.
      synced = plane.Sync("after round " + std::to_string(round));
      if (!synced.ok()) failures[r] = synced.ToString();
    }
  });
  for (const std::string& f : failures) CHECK(f == "");
}

TEST_CASE("a rank that never reaches a sync fails the others within the deadline, named",
          "[transport][shm][fault]") {
  kolo::testing::Watchdog watchdog("shm sync deadline", 30s);
  const double timeout_seconds = 0.5;
  Planes p = MakePlanes(3, timeout_seconds);
  for (const std::string& e : p.errors) REQUIRE(e == "");
  std::vector<Status> results(2);
  std::vector<double> seconds(2);
  RunOnRanks(2, [&](int r) {  // rank 2 stays away
    const auto start = std::chrono::steady_clock::now();
    results[r] = p.planes[r]->Sync("allreduce 'grad'");
    seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(results[r].code() == StatusCode::kDeadlineExceeded);
    CHECK(results[r].message() ==
          "allreduce 'grad': rank 2 did not reach the shared-memory sync point within 0.5 s "
          "(KOLO_TIMEOUT_SECONDS)");
    CHECK(seconds[r] >= timeout_seconds * 0.9);
    CHECK(seconds[r] < 10 * timeout_seconds);
  }
}

TEST_CASE("Interrupt ends a waiting sync at once and every later one", "[transport][shm]") {
  kolo::testing::Watchdog watchdog("shm interrupt", 30s);
  Planes p = MakePlanes(2, 60);
  for (const std::string& e : p.errors) REQUIRE(e == "");
  Status result;
  std::thread waiter([&] { result = p.planes[0]->Sync("allreduce 'x'"); });
  // The waiter may or may not be asleep yet; either way it must return with our status.
  p.planes[0]->Interrupt(Aborted("rank 1 lost"));
  waiter.join();
  CHECK(result == Aborted("rank 1 lost"));
  CHECK(p.planes[0]->Sync("later") == Aborted("rank 1 lost"));
}

TEST_CASE("a segment that cannot be opened is reported, and its creator unlinks it",
          "[transport][shm]") {
  StatusOr<std::unique_ptr<ShmSegment>> missing = ShmSegment::Open("/kolo-no-such-segment", 64);
  CHECK(missing.status().message() ==
        "opening shared memory /kolo-no-such-segment: No such file or directory (ENOENT)");
  const std::string name = FreshShmName();
  {
    StatusOr<std::unique_ptr<ShmSegment>> created = ShmSegment::Create(name, 8192);
    REQUIRE(created.ok());
    CHECK(ShmNameExists(name));
    StatusOr<std::unique_ptr<ShmSegment>> wrong_size = ShmSegment::Open(name, 4096);
    CHECK(wrong_size.status().code() == StatusCode::kInternal);
    CHECK(ShmSegment::Create(name, 8192).status().code() != StatusCode::kOk);  // exists
  }
  CHECK_FALSE(ShmNameExists(name));
}

// Single copy as `mode` says; `spin`: every rank has a core (auto needs it).
std::function<void(int, ShmMesh::Config&)> WithSingleCopy(ShmMesh::SingleCopy mode,
                                                          bool spin = true) {
  return [mode, spin](int, ShmMesh::Config& config) {
    config.single_copy = mode;
    config.spin = spin;
  };
}

uint64_t Address(const void* p) {
  return reinterpret_cast<uint64_t>(p);
}

TEST_CASE(
    "single copy is on where every rank may (auto: up to 16 MiB beyond two ranks, never "
    "for two sharing a core)",
    "[transport][shm]") {
  const int n = GENERATE(range(1, 5));
  kolo::testing::Watchdog watchdog("single copy agreement, " + std::to_string(n) + " ranks", 30s);
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  struct Setting {
    ShmMesh::SingleCopy mode;
    bool spin;  // every rank has a core
    bool on;
  };
  for (const Setting& setting : {Setting{ShmMesh::SingleCopy::kAuto, true, true},
                                 Setting{ShmMesh::SingleCopy::kAuto, false, false},
                                 Setting{ShmMesh::SingleCopy::kOn, false, true},
                                 Setting{ShmMesh::SingleCopy::kOff, true, false}}) {
    Planes p = MakePlanes(n, 10, 4096, WithSingleCopy(setting.mode, setting.spin));
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r << ", mode " << static_cast<int>(setting.mode) << ", spin "
                   << setting.spin);
      REQUIRE(p.errors[r] == "");
      // auto: off for two ranks sharing a core, capped beyond two ranks.
      const bool automatic = setting.mode == ShmMesh::SingleCopy::kAuto;
      const bool on = setting.on || (automatic && n != 2);
      CHECK(p.planes[r]->single_copy() == (on && n > 1));
      CHECK(p.planes[r]->single_copy_max_bytes() ==
            (automatic && n > 2 ? ShmMesh::kAutoMaxBytesBeyondTwoRanks : SIZE_MAX));
      CHECK(p.planes[r]->board_bytes() == ShmMesh::kBoardBytes);
    }
  }
}

TEST_CASE("a rank that may not reach its peers' memory turns single copy off, or fails it if on",
          "[transport][shm]") {
  const int n = GENERATE(2, 3);
  kolo::testing::Watchdog watchdog("single copy refused, " + std::to_string(n) + " ranks", 30s);
  const int refuser = n - 1;
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  for (ShmMesh::SingleCopy mode : {ShmMesh::SingleCopy::kAuto, ShmMesh::SingleCopy::kOn}) {
    bool denied = true;
    Planes p = MakePlanes(n, 10, 4096, [&](int r, ShmMesh::Config& config) {
      config.single_copy = mode;
      config.spin = true;
      if (r == refuser) denied = kolo::testing::DenyCrossMemoryAttach();
    });
    REQUIRE(denied);
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r);
      if (mode == ShmMesh::SingleCopy::kAuto) {
        REQUIRE(p.errors[r] == "");
        CHECK_FALSE(p.planes[r]->single_copy());
        continue;
      }
      CHECK(p.errors[r] == "FAILED_PRECONDITION: shared-memory data plane of " + std::to_string(n) +
                               " ranks: KOLO_SHM_SINGLE_COPY=on, but rank " +
                               std::to_string(refuser) +
                               " could not read rank 0's memory: not permitted (Operation not "
                               "permitted (EPERM); another user, Yama's ptrace_scope or a seccomp "
                               "filter)");
    }
  }
}

TEST_CASE("ranks read and write each other's memory at the addresses on their boards",
          "[transport][shm]") {
  const int n = GENERATE(range(2, 5));
  kolo::testing::Watchdog watchdog("single copy, " + std::to_string(n) + " ranks", 30s);
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  Planes p = MakePlanes(n, 10, 4096, WithSingleCopy(ShmMesh::SingleCopy::kOn));
  for (const std::string& e : p.errors) REQUIRE(e == "");
  constexpr size_t kBytes = 3 * 4096 + 5;
  const std::vector<std::string> failures = RunOnRanks(n, [&](int r) -> std::string {
    ShmMesh& plane = *p.planes[r];
    if (!plane.single_copy()) return "no single copy";
    // Its values, and an inbox where each peer writes a stripe.
    std::vector<uint8_t> values(kBytes), inbox(n * kBytes, 0);
    for (size_t i = 0; i < kBytes; ++i) values[i] = static_cast<uint8_t>(i * 13 + r);
    const uint64_t addresses[2] = {Address(values.data()), Address(inbox.data())};
    std::memcpy(plane.board(r), addresses, sizeof(addresses));
    Status s = plane.Sync("publish");
    for (int peer = 0; peer < n && s.ok(); ++peer) {
      if (peer == r) continue;
      uint64_t theirs[2];
      std::memcpy(theirs, plane.board(peer), sizeof(theirs));
      // Two ranges, the second before the first: the copy follows the list.
      std::vector<uint8_t> seen(kBytes, 0);
      s = plane.ReadPeer(peer, {{theirs[0] + 100, kBytes - 100}, {theirs[0], 100}}, seen.data(),
                         "read");
      for (size_t i = 0; i < kBytes && s.ok(); ++i) {
        const size_t at = (i + 100) % kBytes;
        if (seen[i] != static_cast<uint8_t>(at * 13 + peer)) {
          return "byte " + std::to_string(at) + " of rank " + std::to_string(peer) + " differs";
        }
      }
      if (s.ok()) s = plane.WritePeer(peer, values.data(), {{theirs[1] + r * kBytes, kBytes}}, "w");
    }
    if (s.ok()) s = plane.Sync("written");
    if (!s.ok()) return s.ToString();
    for (int peer = 0; peer < n; ++peer) {
      for (size_t i = 0; i < kBytes && peer != r; ++i) {
        if (inbox[peer * kBytes + i] != static_cast<uint8_t>(i * 13 + peer)) {
          return "rank " + std::to_string(peer) + "'s write did not land at byte " +
                 std::to_string(i);
        }
      }
    }
    return "";
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("nobody writes into the memory of a rank that failed, and reading it is no error",
          "[transport][shm]") {
  kolo::testing::Watchdog watchdog("single copy after a failure", 30s);
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  Planes p = MakePlanes(2, 10, 4096, WithSingleCopy(ShmMesh::SingleCopy::kOn));
  for (const std::string& e : p.errors) REQUIRE(e == "");
  REQUIRE(p.planes[1]->single_copy());
  std::vector<uint8_t> output(4096, 0x5a);
  const std::vector<PeerRange> range = {{Address(output.data()), output.size()}};
  // Rank 1 fails (here: interrupted) and so leaves the plane.
  p.planes[1]->Interrupt(Aborted("rank 1's job is over"));
  CHECK(p.planes[1]->Sync("op") == Aborted("rank 1's job is over"));
  const std::vector<uint8_t> results(4096, 0x77);
  CHECK(p.planes[0]->WritePeer(1, results.data(), range, "deliver").ok());
  CHECK(output == std::vector<uint8_t>(4096, 0x5a));
  std::vector<uint8_t> read(4096, 0x01);
  CHECK(p.planes[0]->ReadPeer(1, range, read.data(), "read").ok());
  CHECK(read == std::vector<uint8_t>(4096, 0x01));
  // The failed rank's own calls return its failure.
  CHECK(p.planes[1]->WritePeer(0, results.data(), range, "w") == Aborted("rank 1's job is over"));
  CHECK(p.planes[1]->ReadPeer(0, range, read.data(), "r") == Aborted("rank 1's job is over"));
}

TEST_CASE("an address that is not mapped in the peer fails the reader, naming the peer",
          "[transport][shm]") {
  kolo::testing::Watchdog watchdog("single copy, bad address", 30s);
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  Planes p = MakePlanes(2, 10, 4096, WithSingleCopy(ShmMesh::SingleCopy::kOn));
  for (const std::string& e : p.errors) REQUIRE(e == "");
  std::vector<uint8_t> local(64);
  const Status read = p.planes[0]->ReadPeer(1, {{64, 64}}, local.data(), "allreduce 'g'");
  CHECK(read.code() == StatusCode::kInternal);
  CHECK(read.message() ==
        "allreduce 'g': could not read rank 1's memory: an address is not mapped there (Bad "
        "address (EFAULT))");
  CHECK(p.planes[0]->Sync("later") == read);  // the plane is unusable afterwards
}

}  // namespace
}  // namespace kolo::transport
