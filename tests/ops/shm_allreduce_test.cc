// Tests of ops/shm_allreduce.h and ops/shm_single_copy.h with 1..4 thread-ranks over real
// shared-memory planes (transport/shm/shm_mesh.h, bootstrapped over loopback meshes): single
// copy (with small pieces, so that few elements make many pieces that cross tensors) and the
// slots (KOLO_SHM_SINGLE_COPY=off) give every rank the bits of a reduction in rank order, 0
// first, computed here with the same kernels; so every rank gets the same bits, on either
// path. Sizes 0, 1, primes and several MiB, fused tensors, in and out of place, prescale,
// postscale and integer average; tensors that overlap one another still reduce their inputs.
#include "ops/shm_allreduce.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/half.h"
#include "ops/reduce_kernels.h"
#include "tests/support/cross_memory_attach.h"
#include "tests/support/loopback_mesh.h"
#include "tests/support/rank_threads.h"
#include "tests/support/watchdog.h"
#include "transport/shm/shm_mesh.h"

namespace kolo::ops {
namespace {

using namespace std::chrono_literals;
using testing::RunOnRanks;
using transport::ShmMesh;

struct Case {
  DataType dtype;
  ReduceOp op;
  ReduceScaling scaling;
  std::vector<size_t> counts;  // one tensor each; several: fused
  bool in_place;
};

std::string Describe(const Case& c) {
  std::string counts;
  for (size_t count : c.counts) counts += (counts.empty() ? "" : ",") + std::to_string(count);
  return DataTypeName(c.dtype) + " " + ReduceOpName(c.op) + " pre " +
         std::to_string(c.scaling.prescale) + " post " + std::to_string(c.scaling.postscale) +
         " divisor " + std::to_string(c.scaling.divisor) + " [" + counts + "]" +
         (c.in_place ? " in place" : "");
}

// Tensor t's input on `rank`: floating values whose sums depend on the order of addition,
// small integers (some negative) for int32.
std::vector<uint8_t> Input(const Case& c, int rank, size_t t) {
  const size_t n = c.counts[t];
  std::vector<uint8_t> bytes(n * DataTypeSize(c.dtype));
  for (size_t i = 0; i < n; ++i) {
    const size_t k = i * 7919 + t * 31 + static_cast<size_t>(rank) * 104729;
    const double v = 1.0 / static_cast<double>(1 + k % 1000003);
    uint8_t* at = bytes.data() + i * DataTypeSize(c.dtype);
    if (c.dtype == DataType::kFloat64) {
      std::memcpy(at, &v, 8);
    } else if (c.dtype == DataType::kFloat32) {
      const float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
    } else if (c.dtype == DataType::kFloat16) {
      const uint16_t h = FloatToHalf(static_cast<float>(v * 1000));
      std::memcpy(at, &h, 2);
    } else {
      const int32_t x = static_cast<int32_t>(k % 97) - 40;
      std::memcpy(at, &x, 4);
    }
  }
  return bytes;
}

// Every rank's input prescaled, reduced in rank order with the kernels, then the postscale or
// integer average: the bits every rank must hold.
std::vector<uint8_t> Expected(const Case& c, int n, size_t t) {
  const size_t count = c.counts[t];
  std::vector<uint8_t> result(count * DataTypeSize(c.dtype)), scaled(result.size());
  for (int r = 0; r < n; ++r) {
    const std::vector<uint8_t> input = Input(c, r, t);
    ScaleCopy(r == 0 ? result.data() : scaled.data(), input.data(), count, c.dtype,
              c.scaling.prescale);
    if (r > 0) Reduce(result.data(), scaled.data(), count, c.dtype, c.op);
  }
  ScaleResult(result.data(), count, c.dtype, c.scaling);
  return result;
}

// Runs `c` on one rank; "" when every output holds the expected bits and every input that is
// not also an output is untouched.
std::string RunCase(ShmAllreduce& allreduce, int rank, int n, const Case& c) {
  std::vector<std::vector<uint8_t>> inputs, outputs;
  std::vector<ReduceSpan> spans;
  for (size_t t = 0; t < c.counts.size(); ++t) {
    inputs.push_back(Input(c, rank, t));
    outputs.emplace_back(inputs.back().size(), 0xAB);
  }
  for (size_t t = 0; t < c.counts.size(); ++t) {
    void* output = c.in_place ? inputs[t].data() : outputs[t].data();
    spans.push_back({inputs[t].data(), output, c.counts[t]});
  }
  const Status status = allreduce.Run(spans, c.dtype, c.op, c.scaling, Describe(c));
  if (!status.ok()) return status.ToString();
  for (size_t t = 0; t < c.counts.size(); ++t) {
    if ((c.in_place ? inputs[t] : outputs[t]) != Expected(c, n, t)) {
      return Describe(c) + ": tensor " + std::to_string(t) + " differs from rank order";
    }
    if (!c.in_place && inputs[t] != Input(c, rank, t)) {
      return Describe(c) + ": input " + std::to_string(t) + " was written";
    }
  }
  return "";
}

std::vector<Case> Cases(int n) {
  const std::vector<std::vector<size_t>> layouts = {
      {0}, {1}, {13}, {997}, {4099}, {3, 0, 1, 17}, {1000, 1, 2048, 7, 5}};
  std::vector<Case> cases;
  for (const auto& counts : layouts) {
    for (bool in_place : {false, true}) {
      cases.push_back({DataType::kFloat32, ReduceOp::kSum, {}, counts, in_place});
      cases.push_back({DataType::kFloat32, ReduceOp::kMax, {}, counts, in_place});
      cases.push_back({DataType::kFloat64, ReduceOp::kSum, {0.5, 3.0, 0}, counts, in_place});
      cases.push_back({DataType::kFloat16, ReduceOp::kSum, {2.0, 0.25, 0}, counts, in_place});
      cases.push_back({DataType::kInt32, ReduceOp::kAverage, {1.0, 3.0, n}, counts, in_place});
      cases.push_back({DataType::kInt32, ReduceOp::kProduct, {}, counts, in_place});
    }
  }
  return cases;
}

struct Job {
  testing::Meshes meshes;
  std::vector<std::unique_ptr<ShmMesh>> planes;
};

// n ranks' planes, with single copy as `mode` says.
Job MakeJob(int n, ShmMesh::SingleCopy mode) {
  Job job;
  StatusOr<testing::Meshes> meshes = testing::ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  job.meshes = std::move(meshes).value();
  job.planes.resize(n);
  const std::vector<std::string> created = RunOnRanks(n, [&](int r) {
    ShmMesh::Config config;
    config.rank = r;
    config.size = n;
    config.slot_bytes = 1024;  // several chunks through the slots too
    config.timeout_seconds = 10;
    config.single_copy = mode;
    StatusOr<std::unique_ptr<ShmMesh>> plane = ShmMesh::Create(config, *job.meshes[r]);
    if (!plane.ok()) return plane.status().ToString();
    job.planes[r] = std::move(plane).value();
    return std::string();
  });
  for (const std::string& failure : created) REQUIRE(failure == "");
  return job;
}

// Runs `cases` on every rank of `job`; the failures, "rank r: ...". Checks that exactly the
// cases `single_copy(c)` says went straight between the tensors.
std::vector<std::string> RunCases(Job& job, const ShmSingleCopy::Tuning& tuning,
                                  const std::vector<Case>& cases,
                                  const std::function<bool(const Case&)>& single_copy) {
  const int n = static_cast<int>(job.planes.size());
  return testing::Failures(RunOnRanks(n, [&](int r) -> std::string {
    ShmAllreduce allreduce(*job.planes[r], tuning);
    for (const Case& c : cases) {
      const uint64_t before = allreduce.single_copy_ops();
      std::string failure = RunCase(allreduce, r, n, c);
      if (failure.empty() && allreduce.single_copy_ops() - before != (single_copy(c) ? 1 : 0)) {
        failure = Describe(c) + (single_copy(c) ? ": went through the slots"
                                                : ": went straight between the tensors");
      }
      if (!failure.empty()) {
        for (auto& plane : job.planes) plane->Interrupt(Aborted("rank " + std::to_string(r)));
        return failure;
      }
    }
    return "";
  }));
}

size_t Bytes(const Case& c) {
  size_t total = 0;
  for (size_t count : c.counts) total += count * DataTypeSize(c.dtype);
  return total;
}

TEST_CASE("shared-memory allreduce gives the bits of a rank-order reduction on either path",
          "[ops][shm]") {
  const int n = GENERATE(range(1, 5));
  const bool single_copy = GENERATE(true, false);
  testing::Watchdog watchdog(
      "shm allreduce, " + std::to_string(n) + " ranks, single copy " + (single_copy ? "on" : "off"),
      120s);
  Job job = MakeJob(n, single_copy ? ShmMesh::SingleCopy::kOn : ShmMesh::SingleCopy::kOff);
  for (const auto& plane : job.planes) CHECK(plane->single_copy() == (single_copy && n > 1));
  // 128-byte pieces from the first byte: single copy takes every op here (but empty ones).
  const ShmSingleCopy::Tuning tiny{128, 1};
  const auto expect = [&](const Case& c) { return single_copy && n > 1 && Bytes(c) > 0; };
  for (const std::string& failure : RunCases(job, tiny, Cases(n), expect)) CHECK(failure == "");
}

TEST_CASE("shared-memory allreduce of several MiB, at the default sizes, on either path",
          "[ops][shm]") {
  const int n = GENERATE(2, 3, 4);
  const bool single_copy = GENERATE(true, false);
  testing::Watchdog watchdog("shm allreduce of MiBs, " + std::to_string(n) + " ranks", 120s);
  if (single_copy && !testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  Job job = MakeJob(n, single_copy ? ShmMesh::SingleCopy::kOn : ShmMesh::SingleCopy::kOff);
  // Pieces of 256 KiB whose slices end mid-tensor; below single copy's 256 KiB, the slots.
  const std::vector<Case> cases = {
      {DataType::kFloat32, ReduceOp::kSum, {}, {3 * (1 << 18) + 7}, true},
      {DataType::kFloat32, ReduceOp::kAverage, {1.0, 0.5, 0}, {(1 << 20) + 1, 65521}, false},
      {DataType::kFloat16, ReduceOp::kSum, {0.5, 1.0, 0}, {(1 << 20) + 3}, true},
      {DataType::kFloat32, ReduceOp::kSum, {}, {65535}, true},
  };
  const auto expect = [&](const Case& c) {
    return single_copy && Bytes(c) >= ShmSingleCopy::Tuning::kMinBytes;
  };
  for (const std::string& failure : RunCases(job, {}, cases, expect)) CHECK(failure == "");
}

TEST_CASE("fused tensors whose memory overlaps go through the slots on every rank", "[ops][shm]") {
  const int n = GENERATE(2, 3);
  testing::Watchdog watchdog("shm allreduce, overlapping tensors", 60s);
  const bool single_copy = true;
  if (single_copy && !testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  Job job = MakeJob(n, ShmMesh::SingleCopy::kOn);
  const std::vector<std::string> failures = RunOnRanks(n, [&](int r) -> std::string {
    ShmAllreduce allreduce(*job.planes[r], {128, 1});
    // a: a_in -> shared; b: shared -> b_out (b reads what a's output overwrites), on rank 1
    // only; the others' tensors are apart. Every rank must still take the slot path.
    std::vector<float> a_in(100, 1.0f + r), shared(100, 10.0f * (r + 1)), b_in(100), b_out(100);
    for (float& v : b_in) v = 10.0f * (r + 1);
    const void* b_input = r == 1 ? static_cast<const void*>(shared.data()) : b_in.data();
    const std::vector<ReduceSpan> spans = {{a_in.data(), shared.data(), 100},
                                           {b_input, b_out.data(), 100}};
    const Status s = allreduce.Run(spans, DataType::kFloat32, ReduceOp::kSum, {}, "overlap");
    if (!s.ok()) return s.ToString();
    if (allreduce.single_copy_ops() != 0) return "went straight between the tensors";
    float a_sum = 0, b_sum = 0;
    for (int k = 0; k < n; ++k) {
      a_sum += 1.0f + k;
      b_sum += 10.0f * (k + 1);
    }
    for (int i = 0; i < 100; ++i) {
      if (shared[i] != a_sum) return "a[" + std::to_string(i) + "] = " + std::to_string(shared[i]);
      if (b_out[i] != b_sum) return "b[" + std::to_string(i) + "] = " + std::to_string(b_out[i]);
    }
    return "";
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

}  // namespace
}  // namespace kolo::ops
