// Tests of transport/shm/shm_mesh.h and shm_segment.h with 1..4 thread-ranks bootstrapped over
// real loopback TCP meshes: the segment's name is gone from /dev/shm once every rank has it
// mapped, slots written before a Sync are seen by every rank after it, a rank that never
// arrives fails the others within the deadline naming it, and Interrupt ends a waiting Sync.
#include "transport/shm/shm_mesh.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

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

Planes MakePlanes(int n, double timeout_seconds, size_t slot_bytes = 4096) {
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

}  // namespace
}  // namespace kolo::transport
