// SimCollectives computes what NCCL computes: every collective, dtype, reduce op and prescale
// on 1 to 4 ranks (threads), counts 0, 1, a prime and one not divisible by the rank count,
// checked element by element against a reference computed on the host.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "tests/ops/gpu/sim_rank.h"
#include "tests/support/element_codec.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::gpu;
using namespace kolo::gpu::testing;
using namespace std::chrono_literals;
using kolo::testing::kAllOps;
using kolo::testing::kNcclDataTypes;

namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1022};  // 1022: not divisible by 3 or 4

// A value that tells ranks and elements apart, exact in every dtype (1..50).
double Tag(int rank, size_t i) {
  return 1.0 + static_cast<double>((rank * 7 + i * 3) % 50);
}

std::vector<uint8_t> Values(DataType dtype, size_t count, const std::function<double(size_t)>& f) {
  std::vector<uint8_t> bytes(count * DataTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) kolo::testing::StoreElement(dtype, bytes.data(), i, f(i));
  return bytes;
}

// "" when element i of `got` is want(i) within the dtype's rounding, else the first mismatch.
std::string Compare(const std::string& what, const std::vector<uint8_t>& got, DataType dtype,
                    size_t count, const std::function<double(size_t)>& want) {
  const double tolerance = dtype == DataType::kFloat16    ? 1e-3
                           : dtype == DataType::kBFloat16 ? 8e-3
                           : dtype == DataType::kFloat32  ? 1e-6
                                                          : 1e-12;
  if (got.size() != count * DataTypeSize(dtype)) return what + ": wrong size";
  for (size_t i = 0; i < count; ++i) {
    const double g = kolo::testing::LoadElement(dtype, got.data(), i);
    const double w = want(i);
    if (std::fabs(g - w) > tolerance * std::max(1.0, std::fabs(w))) {
      return what + ": element " + std::to_string(i) + " is " + std::to_string(g) + ", expected " +
             std::to_string(w);
    }
  }
  return "";
}

std::string Describe(const char* op, DataType dtype, ReduceOp rop, size_t count, double scale) {
  return std::string(op) + " " + DataTypeName(dtype) + " " + ReduceOpName(rop) + " x" +
         std::to_string(count) + " prescale " + std::to_string(scale);
}

std::vector<double> Prescales(DataType dtype, ReduceOp op) {
  if (IsFloatingPoint(dtype) && (op == ReduceOp::kSum || op == ReduceOp::kAverage)) {
    return {1.0, 0.5};
  }
  return {1.0};
}

// AllReduce and ReduceScatter of every dtype, op, prescale and count on one rank.
std::string ReduceSweep(SimRank& rank) {
  const int n = rank.size();
  for (DataType dtype : kNcclDataTypes) {
    for (ReduceOp op : kAllOps) {
      for (double scale : Prescales(dtype, op)) {
        for (size_t count : kCounts) {
          const size_t esize = DataTypeSize(dtype);
          // AllReduce, out of place.
          std::string what = Describe("allreduce", dtype, op, count, scale);
          auto in = kolo::testing::MakeInput(dtype, static_cast<int64_t>(count), rank.rank(), op);
          void* send = rank.Upload(in);
          void* recv = rank.Alloc(count * esize);
          if (send == nullptr || recv == nullptr) return what + ": no memory";
          Status s = rank.coll().AllReduce(send, recv, count, dtype, op, scale, rank.comm(),
                                           rank.stream());
          StatusOr<std::vector<uint8_t>> out = s.ok() ? rank.Download(recv, count * esize) : s;
          if (!out.ok()) return what + ": " + out.status().ToString();
          std::string bad = Compare(what, *out, dtype, count, [&](size_t i) {
            return scale * kolo::testing::ExpectedAllreduce(n, static_cast<int64_t>(i), op, dtype);
          });
          if (!bad.empty()) return bad;
          // ReduceScatter: rank r keeps block r of the allreduce of size * count elements.
          what = Describe("reducescatter", dtype, op, count, scale);
          const size_t total = count * static_cast<size_t>(n);
          in = kolo::testing::MakeInput(dtype, static_cast<int64_t>(total), rank.rank(), op);
          send = rank.Upload(in);
          recv = rank.Alloc(count * esize);
          if (send == nullptr || recv == nullptr) return what + ": no memory";
          s = rank.coll().ReduceScatter(send, recv, count, dtype, op, scale, rank.comm(),
                                        rank.stream());
          out = s.ok() ? rank.Download(recv, count * esize) : s;
          if (!out.ok()) return what + ": " + out.status().ToString();
          const size_t base = static_cast<size_t>(rank.rank()) * count;
          bad = Compare(what, *out, dtype, count, [&](size_t i) {
            return scale *
                   kolo::testing::ExpectedAllreduce(n, static_cast<int64_t>(base + i), op, dtype);
          });
          if (!bad.empty()) return bad;
        }
      }
    }
  }
  return "";
}

// Broadcast (in and out of place), AllGather and alltoall (grouped Send/Recv) of every dtype
// and count on one rank.
std::string MoveSweep(SimRank& rank) {
  const int n = rank.size();
  const int me = rank.rank();
  const int root = n - 1;
  for (DataType dtype : kNcclDataTypes) {
    for (size_t count : kCounts) {
      const size_t esize = DataTypeSize(dtype);
      const std::string suffix = " " + DataTypeName(dtype) + " x" + std::to_string(count);
      // Broadcast from the last rank, in place.
      void* buf = rank.Upload(Values(dtype, count, [&](size_t i) { return Tag(me, i); }));
      if (buf == nullptr) return "broadcast: no memory";
      Status s = rank.coll().Broadcast(buf, buf, count, dtype, root, rank.comm(), rank.stream());
      StatusOr<std::vector<uint8_t>> out = s.ok() ? rank.Download(buf, count * esize) : s;
      if (!out.ok()) return "broadcast" + suffix + ": " + out.status().ToString();
      std::string bad = Compare("broadcast in place" + suffix, *out, dtype, count,
                                [&](size_t i) { return Tag(root, i); });
      if (!bad.empty()) return bad;
      // Broadcast from rank 0, out of place.
      void* recv = rank.Alloc(count * esize);
      s = rank.coll().Broadcast(buf, recv, count, dtype, 0, rank.comm(), rank.stream());
      out = s.ok() ? rank.Download(recv, count * esize) : s;
      if (!out.ok()) return "broadcast" + suffix + ": " + out.status().ToString();
      bad =
          Compare("broadcast" + suffix, *out, dtype, count, [&](size_t i) { return Tag(root, i); });
      if (!bad.empty()) return bad;
      // AllGather: every rank's block in rank order.
      void* send = rank.Upload(Values(dtype, count, [&](size_t i) { return Tag(me, i); }));
      const size_t total = count * static_cast<size_t>(n);
      recv = rank.Alloc(total * esize);
      s = rank.coll().AllGather(send, recv, count, dtype, rank.comm(), rank.stream());
      out = s.ok() ? rank.Download(recv, total * esize) : s;
      if (!out.ok()) return "allgather" + suffix + ": " + out.status().ToString();
      bad = Compare("allgather" + suffix, *out, dtype, total, [&](size_t i) {
        return Tag(static_cast<int>(i / std::max<size_t>(count, 1)),
                   i % std::max<size_t>(count, 1));
      });
      if (!bad.empty()) return bad;
      // Alltoall: block p of my send goes to rank p; block p of my recv comes from rank p.
      send = rank.Upload(Values(dtype, total, [&](size_t i) { return Tag(me, i); }));
      recv = rank.Alloc(total * esize);
      s = rank.coll().GroupStart();
      for (int p = 0; p < n && s.ok(); ++p) {
        const size_t at = static_cast<size_t>(p) * count * esize;
        s = rank.coll().Send(static_cast<char*>(send) + at, count, dtype, p, rank.comm(),
                             rank.stream());
        if (s.ok()) {
          s = rank.coll().Recv(static_cast<char*>(recv) + at, count, dtype, p, rank.comm(),
                               rank.stream());
        }
      }
      const Status ended = rank.coll().GroupEnd();
      if (s.ok()) s = ended;
      out = s.ok() ? rank.Download(recv, total * esize) : s;
      if (!out.ok()) return "alltoall" + suffix + ": " + out.status().ToString();
      bad = Compare("alltoall" + suffix, *out, dtype, total, [&](size_t i) {
        const size_t c = std::max<size_t>(count, 1);
        return Tag(static_cast<int>(i / c), static_cast<size_t>(me) * count + i % c);
      });
      if (!bad.empty()) return bad;
    }
  }
  return "";
}

}  // namespace

TEST_CASE("AllReduce and ReduceScatter reduce across ranks for every dtype, op and prescale",
          "[gpu-sim][collectives]") {
  const int size = GENERATE(1, 2, 3, 4);
  kolo::testing::Watchdog watchdog("reduce sweep on " + std::to_string(size) + " ranks", 120s);
  for (const std::string& failure : RunRanks(size, ReduceSweep)) CHECK(failure == "");
}

TEST_CASE("Broadcast, AllGather and grouped Send/Recv move every rank's bytes where they belong",
          "[gpu-sim][collectives]") {
  const int size = GENERATE(1, 2, 3, 4);
  kolo::testing::Watchdog watchdog("move sweep on " + std::to_string(size) + " ranks", 120s);
  for (const std::string& failure : RunRanks(size, MoveSweep)) CHECK(failure == "");
}
