// Tests of the pairwise allreduces, recursive doubling (ops/recursive_doubling.h) and
// halving-doubling (ops/halving_doubling.h), from one table: over real loopback TCP
// (transport::TcpMesh) with the ranks as threads, every dtype and op, counts 0, 1, below the
// world size, a prime and uneven sizes, fused (segmented) buffers, every rank ending with the
// same bits from random inputs (NaN payloads included); and the error paths: a world size that
// is not a power of two, a lost peer, a silent peer past the deadline, an interrupt. Then what
// is one algorithm's own: halving-doubling's schedule and its pipelining through a small
// scratch, recursive doubling's refusal of a message larger than its scratch.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/data_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/halving_doubling.h"
#include "ops/recursive_doubling.h"
#include "ops/ring_allreduce.h"
#include "ops/segmented_buffer.h"
#include "tests/ops/ring_reference.h"
#include "tests/support/loopback_mesh.h"
#include "tests/support/watchdog.h"

namespace kolo::testing {
namespace {

using namespace std::chrono_literals;

using PairwiseAllreduce = Status (*)(DataPlane&, const ops::SegmentedBuffer&, DataType, ReduceOp,
                                     ops::RingScratch&, const std::string&);

// Runs `algorithm` on every rank for every dtype x op and each of `counts`, each buffer split
// into up to `pieces` pieces of piece_unit, 2 piece_unit, ... elements (the last takes the
// rest) to exercise fused tensors, and compares every element with the direct computation.
// Returns the first failure of each rank ("" when it passed); a failing rank interrupts the
// others so that they stop at once.
inline std::vector<std::string> RunAllreduceCases(PairwiseAllreduce algorithm, Meshes& meshes,
                                                  const std::vector<size_t>& counts, int pieces,
                                                  size_t piece_unit, size_t scratch_bytes) {
  return RunOnRanks(static_cast<int>(meshes.size()), [&](int rank) {
    DataPlane& plane = *meshes[rank];
    const int n = plane.size();
    ops::RingScratch scratch(scratch_bytes);
    for (size_t count : counts) {
      for (int d = 0; d < kNumDataTypes; ++d) {
        const DataType dtype = static_cast<DataType>(d);
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                            ReduceOp::kProduct}) {
          const std::string what = "allreduce '" + std::to_string(count) + " x " +
                                   DataTypeName(dtype) + " " + ReduceOpName(op) + "'";
          ElementBuffer buffer = MakeRankInput(dtype, op, rank, count);
          const size_t element_size = DataTypeSize(dtype);
          uint8_t* data = static_cast<uint8_t*>(buffer.data());
          std::vector<ops::BytePiece> split;
          size_t begin = 0;
          for (size_t p = 1; p < static_cast<size_t>(pieces) && begin + p * piece_unit <= count;
               ++p) {
            split.push_back({data + begin * element_size, p * piece_unit * element_size});
            begin += p * piece_unit;
          }
          split.push_back({data + begin * element_size, (count - begin) * element_size});
          const Status status =
              algorithm(plane, ops::SegmentedBuffer(split), dtype, op, scratch, what);
          std::string failure = status.ok() ? "" : status.ToString();
          for (size_t i = 0; failure.empty() && i < count; ++i) {
            const double expected = ReducedInput(dtype, op, n, i);  // exact
            if (buffer.Get(i) != expected) {
              failure = what + ": element " + std::to_string(i) + " is " +
                        std::to_string(buffer.Get(i)) + ", expected " + std::to_string(expected);
            }
          }
          if (!failure.empty()) {
            InterruptAll(meshes, "rank " + std::to_string(rank) + " failed");
            return "rank " + std::to_string(rank) + ": " + failure;
          }
        }
      }
    }
    return std::string();
  });
}

// For RunOnRankZero: break nothing, the peers stay connected and silent.
inline void BreakNothing(Meshes&) {}

struct FaultRun {
  Status status = Internal("not run");
  double seconds = 0;
};

// `count` float32 elements through `algorithm` on rank 0, with a scratch of `scratch_bytes`.
// Rank 0's mesh polls without sleeping (SetCoreShare(1, 1)) so that the deadline is also tested
// on the spinning path.
inline FaultRun RunOnRankZero(PairwiseAllreduce algorithm, int n, double timeout_seconds,
                              const std::function<void(Meshes&)>& prepare, size_t count,
                              const std::string& what,
                              size_t scratch_bytes = ops::RingScratch::kDefaultBytes) {
  FaultRun run;
  // A full mesh: the faults are on connections already made (a lazy mesh's peer that is gone
  // before its first exchange: tests/transport/lazy_mesh_test.cc).
  StatusOr<Meshes> meshes = ConnectLoopbackMeshes(n, timeout_seconds, /*lazy=*/false);
  if (!meshes.ok()) {
    run.status = meshes.status().WithContext("test setup");
    return run;
  }
  (*meshes)[0]->SetCoreShare(1, 1);
  prepare(*meshes);
  std::vector<float> data(count, 1.0f);
  ops::RingScratch scratch(scratch_bytes);
  const auto start = std::chrono::steady_clock::now();
  run.status = algorithm(*(*meshes)[0], ops::SegmentedBuffer(data.data(), count * sizeof(float)),
                         DataType::kFloat32, ReduceOp::kSum, scratch, what);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

// One row per algorithm: what it is called, and the sweep each test runs it over.
struct PairwiseCase {
  const char* name;  // as the algorithm names itself in its errors
  PairwiseAllreduce run;
  std::vector<int> sizes;      // world sizes of the exactness sweep
  int pieces;                  // fused tensors: up to `pieces` pieces ...
  size_t piece_unit;           // ... of piece_unit, 2 piece_unit, ... elements
  std::vector<size_t> counts;  // element counts of the exactness sweep
  std::vector<int> bit_sizes;  // world sizes of the same-bits test
  std::vector<DataType> bit_dtypes;
  std::vector<ReduceOp> bit_ops;
  size_t bit_count;
  int fault_size;  // world size of the lost- and silent-peer tests; rank 0's first partner
                   // is fault_size / 2
};

const std::vector<PairwiseCase>& Cases() {
  static const std::vector<PairwiseCase> cases = {
      {"recursive doubling",
       ops::RecursiveDoublingAllreduce,
       {1, 2, 4},
       4,
       1,
       {0, 1, 3, 13, 1031, 16411},
       {2, 4},
       {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32},
       {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kProduct},
       8191,
       2},
      {"halving-doubling",
       ops::HalvingDoublingAllreduce,
       {1, 2, 4, 8},
       5,
       3,
       {0, 1, 3, 13, 1031},
       {4},
       {DataType::kFloat16, DataType::kFloat32},
       {ReduceOp::kSum},
       100003,
       4},
  };
  return cases;
}

// Generates each row of Cases() in turn (as a Catch2 GENERATE).
const PairwiseCase& EachCase() {
  const size_t index = GENERATE(range(size_t{0}, Cases().size()));
  return Cases()[index];
}

TEST_CASE("a pairwise allreduce matches a direct computation for every dtype and op",
          "[ops][recursive_doubling][halving_doubling][tcp]") {
  const PairwiseCase& c = EachCase();
  const int n = GENERATE_REF(from_range(c.sizes));
  const int pieces = GENERATE_REF(values({1, c.pieces}));
  Watchdog watchdog(std::string(c.name) + ", n=" + std::to_string(n), 60s);
  StatusOr<Meshes> meshes = ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  // Busy polling (transport/tcp/stream_pump.h) on and off: the pump's two ways of waiting.
  const bool busy_poll = GENERATE(false, true);
  for (auto& mesh : *meshes) mesh->SetCoreShare(busy_poll ? 1 : 1 << 20, 1);
  INFO(c.name << ", " << n << " ranks, " << pieces << " pieces, busy poll " << busy_poll);
  for (const std::string& failure : RunAllreduceCases(
           c.run, *meshes, c.counts, pieces, c.piece_unit, ops::RingScratch::kDefaultBytes)) {
    CHECK(failure == "");
  }
}

TEST_CASE("a pairwise allreduce leaves the same bits on every rank, NaN payloads included",
          "[ops][recursive_doubling][halving_doubling][tcp]") {
  const PairwiseCase& c = EachCase();
  const int n = GENERATE_REF(from_range(c.bit_sizes));
  const DataType dtype = GENERATE_REF(from_range(c.bit_dtypes));
  const ReduceOp op = GENERATE_REF(from_range(c.bit_ops));
  Watchdog watchdog(std::string(c.name) + " bits, n=" + std::to_string(n), 60s);
  StatusOr<Meshes> meshes = ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  // Random bit patterns: about 3% of float16 values are NaNs with random payloads, so the
  // order of the operands shows in the result wherever two NaNs meet.
  std::vector<ElementBuffer> buffers;
  for (int rank = 0; rank < n; ++rank) {
    buffers.emplace_back(dtype, c.bit_count);
    std::mt19937 rng(static_cast<uint32_t>(rank + 1));
    uint8_t* bytes = static_cast<uint8_t*>(buffers.back().data());
    for (size_t i = 0; i < buffers.back().bytes(); ++i) bytes[i] = static_cast<uint8_t>(rng());
  }
  const std::vector<std::string> failures = RunOnRanks(n, [&](int rank) {
    ops::RingScratch scratch;
    const Status status =
        c.run(*(*meshes)[rank], ops::SegmentedBuffer(buffers[rank].data(), buffers[rank].bytes()),
              dtype, op, scratch, "allreduce 'random'");
    if (!status.ok()) InterruptAll(*meshes, "rank " + std::to_string(rank) + " failed");
    return status.ok() ? std::string() : status.ToString();
  });
  for (const std::string& failure : failures) REQUIRE(failure == "");
  for (int rank = 1; rank < n; ++rank) {
    INFO(c.name << " " << DataTypeName(dtype) << " " << ReduceOpName(op) << ": rank " << rank
                << " vs rank 0");
    CHECK(BytesEqual(buffers[rank], buffers[0]));
  }
}

TEST_CASE("a pairwise allreduce refuses a world size that is not a power of two",
          "[ops][recursive_doubling][halving_doubling][tcp]") {
  const PairwiseCase& c = EachCase();
  Watchdog watchdog(std::string(c.name) + ", 3 ranks", 30s);
  const FaultRun run = RunOnRankZero(c.run, 3, 10, BreakNothing, 10, "allreduce 'odd'");
  CHECK(run.status == InvalidArgument("allreduce 'odd': " + std::string(c.name) +
                                      " needs a power-of-two number of ranks, not 3"));
}

TEST_CASE("a pairwise allreduce names the op and the peer when a peer is lost",
          "[ops][recursive_doubling][halving_doubling][tcp]") {
  const PairwiseCase& c = EachCase();
  Watchdog watchdog(std::string(c.name) + ", lost peer", 30s);
  const int partner = c.fault_size / 2;  // rank 0's first partner closes its connections
  const FaultRun run = RunOnRankZero(
      c.run, c.fault_size, 10, [partner](Meshes& m) { m[partner].reset(); }, 1000,
      "allreduce 'grad/w1'");
  CHECK(run.status == Unavailable("allreduce 'grad/w1': rank " + std::to_string(partner) +
                                  " closed the connection"));
}

TEST_CASE("a pairwise allreduce fails by the deadline when a peer stays silent",
          "[ops][recursive_doubling][halving_doubling][tcp]") {
  const PairwiseCase& c = EachCase();
  Watchdog watchdog(std::string(c.name) + ", silent peer", 30s);
  const double timeout_seconds = 0.5;
  const FaultRun run =
      RunOnRankZero(c.run, c.fault_size, timeout_seconds, BreakNothing, 100, "allreduce 'silent'");
  CHECK(run.status.code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(run.status.message(), Catch::StartsWith("allreduce 'silent': no data from rank " +
                                                     std::to_string(c.fault_size / 2)));
  CHECK(run.seconds < 4 * timeout_seconds);
}

TEST_CASE("a pairwise allreduce returns the interrupt status",
          "[ops][recursive_doubling][halving_doubling][tcp]") {
  const PairwiseCase& c = EachCase();
  Watchdog watchdog(std::string(c.name) + ", interrupt", 30s);
  const FaultRun run = RunOnRankZero(
      c.run, 2, 10, [](Meshes& m) { m[0]->Interrupt(Aborted("rank 1 was lost")); }, 10,
      "allreduce 'x'");
  CHECK(run.status == Aborted("rank 1 was lost"));
}

// Halving-doubling's own: its schedule as a plain function, and its pipelining.

bool SameRange(const ops::ElementRange& a, const ops::ElementRange& b) {
  return a.begin == b.begin && a.count == b.count;
}

TEST_CASE("halving-doubling partners swap matching ranges and the halves tile the buffer",
          "[ops][halving_doubling]") {
  const int n = GENERATE(2, 4, 8, 16);
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{5}, size_t{1031});
  std::vector<std::vector<ops::HalvingDoublingStep>> schedules;
  for (int rank = 0; rank < n; ++rank)
    schedules.push_back(ops::HalvingDoublingSchedule(count, rank, n));
  for (int rank = 0; rank < n; ++rank) {
    INFO("n " << n << " count " << count << " rank " << rank);
    REQUIRE(schedules[rank].size() == 2 * static_cast<size_t>(__builtin_ctz(n)));
    for (size_t k = 0; k < schedules[rank].size(); ++k) {
      const ops::HalvingDoublingStep& mine = schedules[rank][k];
      const ops::HalvingDoublingStep& theirs = schedules[mine.partner][k];
      CHECK(theirs.partner == rank);
      CHECK(SameRange(mine.send, theirs.recv));
      CHECK(SameRange(mine.recv, theirs.send));
      CHECK(mine.reduce == (k < schedules[rank].size() / 2));
    }
    // After the halving, the rank keeps chunk `rank`; the last doubling step ends whole.
    const ops::HalvingDoublingStep& last_halving = schedules[rank][schedules[rank].size() / 2 - 1];
    CHECK(SameRange(last_halving.recv, ops::ChunkRange(count, n, rank)));
    const ops::HalvingDoublingStep& last = schedules[rank].back();
    CHECK(std::min(last.send.begin, last.recv.begin) == 0);
    CHECK(last.send.count + last.recv.count == count);
  }
}

TEST_CASE("halving-doubling pipelines ~1 MiB through a small odd-sized scratch",
          "[ops][halving_doubling][tcp]") {
  const int n = GENERATE(2, 4);
  Watchdog watchdog("halving-doubling, 1 MiB, n=" + std::to_string(n), 60s);
  StatusOr<Meshes> meshes = ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  for (const std::string& failure : RunAllreduceCases(ops::HalvingDoublingAllreduce, *meshes,
                                                      {(size_t{1} << 17) + 7}, 3, 3, 4096 + 3)) {
    CHECK(failure == "");
  }
}

// Recursive doubling's own: it sends whole messages, so they must fit its scratch.

TEST_CASE("recursive doubling refuses a message larger than its scratch",
          "[ops][recursive_doubling][tcp]") {
  Watchdog watchdog("recursive doubling, small scratch", 30s);
  const FaultRun run = RunOnRankZero(ops::RecursiveDoublingAllreduce, 2, 10, BreakNothing, 100,
                                     "allreduce 'big'", ops::RingScratch::kMinBytes);
  CHECK(run.status ==
        InvalidArgument(
            "allreduce 'big': 400 bytes do not fit the recursive-doubling scratch of 64"));
}

TEST_CASE("IsPowerOfTwo", "[ops][recursive_doubling]") {
  CHECK_FALSE(ops::IsPowerOfTwo(0));
  CHECK(ops::IsPowerOfTwo(1));
  CHECK(ops::IsPowerOfTwo(2));
  CHECK_FALSE(ops::IsPowerOfTwo(3));
  CHECK(ops::IsPowerOfTwo(4));
  CHECK_FALSE(ops::IsPowerOfTwo(6));
  CHECK(ops::IsPowerOfTwo(1 << 20));
  CHECK_FALSE(ops::IsPowerOfTwo(-4));
}

}  // namespace
}  // namespace kolo::testing
