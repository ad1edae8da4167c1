// Tests of ops/shm_alltoall.h with 1..4 thread-ranks over real shared-memory planes
// (transport/shm/shm_mesh.h, bootstrapped over loopback meshes) with small slots, so that a
// block takes many chunks: split matrices with empty blocks, one block far larger than the
// others, a rank that sends nothing, and sizes that are not multiples of a slot's part; every
// rank's output is checked byte for byte against the blocks every other rank sent it.
#include "ops/shm_alltoall.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/rank_threads.h"
#include "tests/support/shm_job.h"
#include "tests/support/watchdog.h"
#include "transport/shm/shm_mesh.h"

namespace kolo::ops {
namespace {

using namespace std::chrono_literals;
using testing::RunOnRanks;
using transport::ShmMesh;

// Byte k of the block rank s sends rank d: differs by pair and position.
uint8_t ByteOf(size_t s, size_t d, size_t k) {
  return static_cast<uint8_t>(s * 61 + d * 17 + k * 7 + k / 251);
}

// Runs one alltoall of `matrix` (bytes s -> d at s * n + d) on every rank of `job` and checks
// every output; the failures, "rank r: ...".
std::vector<std::string> RunAlltoall(testing::ShmJob& job, const std::vector<size_t>& matrix) {
  const size_t n = job.planes.size();
  return testing::Failures(RunOnRanks(static_cast<int>(n), [&](int r) -> std::string {
    const size_t me = static_cast<size_t>(r);
    std::vector<ByteBlock> send(n), recv(n);
    size_t send_total = 0, recv_total = 0;
    for (size_t p = 0; p < n; ++p) {
      send[p] = {send_total, matrix[me * n + p]};
      recv[p] = {recv_total, matrix[p * n + me]};
      send_total += send[p].bytes;
      recv_total += recv[p].bytes;
    }
    std::vector<uint8_t> input(send_total);
    for (size_t d = 0; d < n; ++d) {
      for (size_t k = 0; k < send[d].bytes; ++k) input[send[d].offset + k] = ByteOf(me, d, k);
    }
    std::vector<uint8_t> output(recv_total, 0xEE);
    Status s = ShmAlltoall(*job.planes[me], input.data(), send, output.data(), recv, matrix,
                           "alltoall 'test'");
    if (!s.ok()) return s.ToString();
    for (size_t from = 0; from < n; ++from) {
      for (size_t k = 0; k < recv[from].bytes; ++k) {
        if (output[recv[from].offset + k] != ByteOf(from, me, k)) {
          return "byte " + std::to_string(k) + " from rank " + std::to_string(from) + " is wrong";
        }
      }
    }
    return "";
  }));
}

}  // namespace

TEST_CASE("Shared-memory alltoall delivers every block, across many chunks", "[ops][shm]") {
  testing::Watchdog watchdog("shm alltoall", 120s);
  for (int n = 1; n <= 4; ++n) {
    // 1 KiB slots: a part of 512, 320 or 256 bytes per destination at 2, 3 and 4 ranks.
    testing::ShmJob job = testing::MakeShmJob(n, 1024, ShmMesh::SingleCopy::kOff);
    const size_t nn = static_cast<size_t>(n) * n;
    std::mt19937 random(static_cast<unsigned>(n));
    // Random blocks, some empty, up to several parts each.
    std::vector<size_t> mixed(nn);
    for (size_t& bytes : mixed) bytes = random() % 3 == 0 ? 0 : random() % 2000;
    // One block far larger than the rest: every rank runs its chunks.
    std::vector<size_t> one_large(nn, 3);
    one_large[nn - 1 - (n > 1 ? 1 : 0)] = 10007;
    // The last rank sends nothing; everything else one byte past a part.
    std::vector<size_t> silent(nn, 1024 / static_cast<size_t>(n) / 64 * 64 + 1);
    for (size_t d = 0; d < static_cast<size_t>(n); ++d) silent[(n - 1) * n + d] = 0;
    for (const auto& [name, matrix] : {std::pair<const char*, std::vector<size_t>>{"mixed", mixed},
                                       {"one large block", one_large},
                                       {"a silent rank", silent},
                                       {"all empty", std::vector<size_t>(nn, 0)}}) {
      INFO(n << " ranks, " << name);
      CHECK(RunAlltoall(job, matrix) == std::vector<std::string>{});
    }
  }
}

TEST_CASE("Shared-memory alltoall refuses a split matrix of the wrong size", "[ops][shm]") {
  testing::Watchdog watchdog("shm alltoall, wrong matrix", 60s);
  testing::ShmJob job = testing::MakeShmJob(1, 1024, ShmMesh::SingleCopy::kOff);
  std::vector<ByteBlock> blocks = {{0, 4}};
  uint8_t in[4] = {1, 2, 3, 4}, out[4] = {};
  Status s = ShmAlltoall(*job.planes[0], in, blocks, out, blocks, {4, 4}, "alltoall 'x'");
  CHECK(s.code() == StatusCode::kInternal);
  CHECK(s.message() ==
        "alltoall 'x': 1 send blocks, 1 receive blocks and a matrix of 2 for 1 "
        "ranks");
}

}  // namespace kolo::ops
