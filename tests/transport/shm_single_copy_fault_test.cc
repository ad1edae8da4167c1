// A peer that dies while its memory is read through single copy (transport/shm/shm_mesh.h,
// ReadPeer): rank 1 is a real process (fault_peer shm-single-copy) that publishes a 64 MiB
// buffer on its board; this test is rank 0, reads it over and over, and SIGKILLs rank 1
// meanwhile. The read must fail at once, naming rank 1 and that its process is gone, and every
// later call on the plane with it; a write to it fails the same way.
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/cross_memory_attach.h"
#include "tests/support/watchdog.h"
#include "transport/shm/shm_mesh.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using kolo::testing::ChildProcess;
using kolo::testing::Watchdog;
using Clock = std::chrono::steady_clock;

constexpr char kPeer[] = KOLO_FAULT_PEER_PATH;

TEST_CASE("A peer process killed while its memory is read is named, at once",
          "[transport][shm][fault]") {
  Watchdog watchdog("peer killed during single copy", 90s);
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  ChildProcess peer({kPeer, "shm-single-copy"}, {}, ChildProcess::Stdin::kPipe);
  const std::string addr = peer.ReadLine(20s);
  REQUIRE(addr.rfind("ADDR ", 0) == 0);
  TcpMesh::Config mesh_config;
  mesh_config.rank = 0;
  mesh_config.size = 2;
  mesh_config.auth.credentials = {"fault-test-key", "fault-test"};  // fault_peer's
  mesh_config.timeout_seconds = 30;
  StatusOr<std::unique_ptr<TcpMesh>> mesh = TcpMesh::Listen(mesh_config);
  REQUIRE(mesh.ok());
  peer.WriteLine((*mesh)->listen_address());
  REQUIRE((*mesh)->Connect({(*mesh)->listen_address(), addr.substr(5)}, Clock::now() + 30s).ok());
  ShmMesh::Config config;
  config.rank = 0;
  config.size = 2;
  config.slot_bytes = 4096;  // fault_peer's
  config.timeout_seconds = 30;
  config.single_copy = ShmMesh::SingleCopy::kOn;
  StatusOr<std::unique_ptr<ShmMesh>> created = ShmMesh::Create(config, **mesh);
  REQUIRE(created.status().ToString() == "OK");
  ShmMesh& plane = **created;
  REQUIRE(plane.Sync("publish").ok());
  REQUIRE(peer.ReadLine(20s) == "PUBLISHED");
  uint64_t published[2];
  std::memcpy(published, plane.board(1), sizeof(published));
  REQUIRE(published[1] == size_t{64} << 20);

  // Read its buffer a MiB at a time, round and round; kill it after the first whole pass.
  constexpr size_t kPiece = size_t{1} << 20;
  std::vector<uint8_t> local(kPiece);
  std::atomic<int> pieces{0};
  Clock::time_point killed;
  std::thread killer([&] {
    const auto deadline = Clock::now() + 30s;
    while (pieces.load() < 64 && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    killed = Clock::now();
    peer.Signal(SIGKILL);
  });
  Status read;
  bool bytes_ok = true;
  const auto limit = Clock::now() + 60s;
  for (size_t at = 0; read.ok() && Clock::now() < limit; at = (at + kPiece) % published[1]) {
    read = plane.ReadPeer(1, {{published[0] + at, kPiece}}, local.data(), "allreduce 'grad'");
    if (read.ok()) {
      bytes_ok = bytes_ok && local[0] == 0x5c && local[kPiece - 1] == 0x5c;
      pieces.fetch_add(1);
    }
  }
  const Clock::time_point failed = Clock::now();
  killer.join();
  CHECK(bytes_ok);
  CHECK(read.code() == StatusCode::kUnavailable);
  CHECK(read.message() ==
        "allreduce 'grad': could not read rank 1's memory: its process is gone (No such process "
        "(ESRCH))");
  CHECK(std::chrono::duration<double>(failed - killed).count() < 1.0);
  // The plane is unusable from now on: every call says why.
  const std::vector<uint8_t> results(64, 1);
  CHECK(plane.WritePeer(1, results.data(), {{published[0], 64}}, "w") == read);
  CHECK(plane.Sync("later") == read);
  peer.Wait();
}

}  // namespace
}  // namespace kolo::transport
