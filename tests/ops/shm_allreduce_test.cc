// Tests of ops/shm_allreduce.h and ops/shm_single_copy.h with 1..4 thread-ranks over real
// shared-memory planes (transport/shm/shm_mesh.h, bootstrapped over loopback meshes): single
// copy (with small pieces, so that few elements make many pieces that cross tensors) and the
// slots (KOLO_SHM_SINGLE_COPY=off) give every rank the bits of a reduction in rank order, 0
// first, computed here with the same kernels; so every rank gets the same bits, on either
// path. Sizes 0, 1, primes and several MiB, fused tensors, in and out of place, prescale,
// postscale and integer average; tensors that overlap one another still reduce their inputs.
#include "ops/shm_allreduce.h"

#include <spdlog/sinks/ostream_sink.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ops/half.h"
#include "ops/reduce_kernels.h"
#include "tests/support/cross_memory_attach.h"
#include "tests/support/rank_threads.h"
#include "tests/support/shm_job.h"
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

// Tensor t's input on `rank`: floating values whose sums depend on the order of addition
// (near 1 for a product, so that it neither vanishes nor overflows), small integers (some
// negative where the type has a sign), and bytes 0, 1 and 2 for bool (any non-zero is true).
std::vector<uint8_t> Input(const Case& c, int rank, size_t t) {
  const size_t n = c.counts[t];
  std::vector<uint8_t> bytes(n * DataTypeSize(c.dtype));
  for (size_t i = 0; i < n; ++i) {
    const size_t k = i * 7919 + t * 31 + static_cast<size_t>(rank) * 104729;
    const double v = c.op == ReduceOp::kProduct ? 0.75 + static_cast<double>(k % 512) / 1024
                                                : 1.0 / static_cast<double>(1 + k % 1000003);
    const int64_t x = static_cast<int64_t>(k % 97) - 40;
    uint8_t* at = bytes.data() + i * DataTypeSize(c.dtype);
    const auto put = [at](auto value) { std::memcpy(at, &value, sizeof(value)); };
    switch (c.dtype) {
      case DataType::kFloat64:
        put(v);
        break;
      case DataType::kFloat32:
        put(static_cast<float>(v));
        break;
      case DataType::kFloat16:
        put(FloatToHalf(static_cast<float>(v * 1000)));
        break;
      case DataType::kBFloat16:
        put(FloatToBFloat16(static_cast<float>(v * 1000)));
        break;
      case DataType::kInt64:
        put(x * 1000003);
        break;
      case DataType::kInt32:
        put(static_cast<int32_t>(x));
        break;
      case DataType::kInt16:
        put(static_cast<int16_t>(x));
        break;
      case DataType::kInt8:
        put(static_cast<int8_t>(x));
        break;
      case DataType::kUInt16:
        put(static_cast<uint16_t>(k % 1009));
        break;
      case DataType::kUInt8:
        put(static_cast<uint8_t>(k % 97));
        break;
      case DataType::kBool:
        put(static_cast<uint8_t>(k % 3));
        break;
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
// not also an output is untouched. `results` (may be null) gets every output.
std::string RunCase(ShmAllreduce& allreduce, int rank, int n, const Case& c,
                    std::vector<std::vector<uint8_t>>* results = nullptr) {
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
  if (results != nullptr) *results = c.in_place ? inputs : outputs;
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

using Job = testing::ShmJob;

// n ranks' planes, with single copy as `mode` says; `tweak` (may be empty) changes a rank's
// configuration, on the thread that creates its plane.
Job MakeJob(int n, ShmMesh::SingleCopy mode,
            const std::function<void(int, ShmMesh::Config&)>& tweak = {}) {
  return testing::MakeShmJob(n, 1024, mode, tweak);  // small slots: several chunks through them
}

// Every output of every case on every rank: [rank][case][tensor].
using Outputs = std::vector<std::vector<std::vector<std::vector<uint8_t>>>>;

// Runs `cases` on every rank of `job`; the failures, "rank r: ...". Checks that exactly the
// cases `single_copy(c)` says went straight between the tensors. `outputs` (may be null) gets
// what every rank's outputs held.
std::vector<std::string> RunCases(Job& job, const ShmSingleCopy::Tuning& tuning,
                                  const std::vector<Case>& cases,
                                  const std::function<bool(const Case&)>& single_copy,
                                  Outputs* outputs = nullptr) {
  const int n = static_cast<int>(job.planes.size());
  if (outputs != nullptr)
    outputs->assign(n, std::vector<std::vector<std::vector<uint8_t>>>(cases.size()));
  return testing::Failures(RunOnRanks(n, [&](int r) -> std::string {
    ShmAllreduce allreduce(*job.planes[r], tuning);
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const uint64_t before = allreduce.single_copy_ops();
      std::string failure =
          RunCase(allreduce, r, n, c, outputs == nullptr ? nullptr : &(*outputs)[r][i]);
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

// Every dtype with every op it takes, in tensors whose counts fall on either side of where
// the ranks' slices (64-byte lines, rounded up) and the 128-byte pieces end: below one line
// (every rank but 0 has nothing to reduce), one line, n lines and one element either side,
// odd and prime counts, and fused tensors across those ends; in and out of place in turn.
// Scale factors on the types that take them.
std::vector<Case> EveryDtypeAndOp(int n) {
  const std::vector<DataType> dtypes = {DataType::kUInt8,   DataType::kInt8,     DataType::kUInt16,
                                        DataType::kInt16,   DataType::kInt32,    DataType::kInt64,
                                        DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                        DataType::kFloat64, DataType::kBool};
  const std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                     ReduceOp::kMax, ReduceOp::kProduct};
  std::vector<Case> cases;
  bool in_place = false;
  for (DataType dtype : dtypes) {
    const size_t line = 64 / DataTypeSize(dtype);
    const size_t lines = line * static_cast<size_t>(n);
    const std::vector<std::vector<size_t>> layouts = {
        {line - 1},  {line},          {lines - 1}, {lines},
        {lines + 1}, {3 * lines + 5}, {1021},      {lines - 1, 2, line + 1, 7}};
    for (ReduceOp op : ops) {
      if (dtype == DataType::kBool && op == ReduceOp::kAverage) continue;  // refused
      ReduceScaling scaling;
      if (op == ReduceOp::kAverage) {
        scaling =
            IsFloatingPoint(dtype) ? ReduceScaling{1.0, 1.0 / n, 0} : ReduceScaling{1.0, 1.0, n};
      } else if (op == ReduceOp::kSum && dtype != DataType::kBool) {
        scaling = {0.5, 3.0, 0};
      }
      for (const auto& counts : layouts) {
        cases.push_back({dtype, op, scaling, counts, in_place});
        in_place = !in_place;
      }
    }
  }
  return cases;
}

TEST_CASE("single copy gives the slot path's bits for every dtype and op, at slice ends",
          "[ops][shm]") {
  const int n = GENERATE(2, 3, 4);
  testing::Watchdog watchdog("shm allreduce, every dtype and op, " + std::to_string(n) + " ranks",
                             240s);
  if (!testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  const std::vector<Case> cases = EveryDtypeAndOp(n);
  Outputs slots, single;
  {
    Job job = MakeJob(n, ShmMesh::SingleCopy::kOff);
    for (const std::string& failure : RunCases(
             job, {}, cases, [](const Case&) { return false; }, &slots)) {
      CHECK(failure == "");
    }
  }
  {
    Job job = MakeJob(n, ShmMesh::SingleCopy::kOn);
    // 128-byte pieces from the first byte: every piece end and slice end is crossed.
    const ShmSingleCopy::Tuning tiny{128, 1};
    for (const std::string& failure : RunCases(
             job, tiny, cases, [](const Case&) { return true; }, &single)) {
      CHECK(failure == "");
    }
  }
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO("rank " << r << ": " << Describe(cases[i]));
      CHECK(single[r][i] == slots[r][i]);
    }
  }
}

TEST_CASE("a rank refused cross-memory attach sends every rank through the slots, said once",
          "[ops][shm]") {
  // auto, two ranks with a core each: single copy unless the probe is refused, here by a real
  // seccomp filter on rank 1's thread, as a container's profile would.
  const int n = 2;
  testing::Watchdog watchdog("shm allreduce, single copy refused", 60s);
  if (!testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  std::ostringstream log;
  auto logger = std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  bool denied = false;
  Job job = MakeJob(n, ShmMesh::SingleCopy::kAuto, [&](int r, ShmMesh::Config& config) {
    config.spin = true;
    config.logger = logger;
    if (r == 1) denied = testing::DenyCrossMemoryAttach();
  });
  REQUIRE(denied);
  for (const auto& plane : job.planes) CHECK_FALSE(plane->single_copy());
  const std::string text = log.str();
  INFO(text);
  const std::string reason =
      "single copy off, allreduce copies through the segment instead: rank 1 could not read "
      "rank 0's memory: not permitted (Operation not permitted (EPERM); another user, Yama's "
      "ptrace_scope or a seccomp filter)";
  CHECK(text.find("[warning] shared-memory data plane of 2 ranks: " + reason) != std::string::npos);
  CHECK(text.find("single copy off") == text.rfind("single copy off"));  // once, by rank 0
  // Every op, even those that would have gone straight between the tensors, takes the slots.
  const ShmSingleCopy::Tuning tiny{128, 1};
  const auto none = [](const Case&) { return false; };
  for (const std::string& failure : RunCases(job, tiny, Cases(n), none)) CHECK(failure == "");
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

TEST_CASE("auto beyond two ranks: ops of at most 16 MiB go single copy, larger ones the slots",
          "[ops][shm]") {
  const int n = 3;
  testing::Watchdog watchdog("shm allreduce at auto's cap, 3 ranks", 120s);
  if (!testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  Job job = MakeJob(n, ShmMesh::SingleCopy::kAuto);
  const size_t cap = ShmMesh::kAutoMaxBytesBeyondTwoRanks;
  REQUIRE(job.planes[0]->single_copy_max_bytes() == cap);
  // At the cap, one element past it (fused: the cap is on the op, not a tensor), under it.
  const std::vector<Case> cases = {
      {DataType::kFloat32, ReduceOp::kSum, {}, {cap / 4}, true},
      {DataType::kFloat32, ReduceOp::kSum, {}, {cap / 8, cap / 8 + 1}, true},
      {DataType::kFloat32, ReduceOp::kSum, {}, {(size_t{1} << 20) + 5}, false},
  };
  const auto expect = [&](const Case& c) { return Bytes(c) <= cap; };
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

TEST_CASE(
    "an op with too many bytes out of place on some rank goes through the slots on every rank",
    "[ops][shm]") {
  const int n = GENERATE(2, 3);
  testing::Watchdog watchdog("shm allreduce, out of place over the limit", 60s);
  if (!testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  Job job = MakeJob(n, ShmMesh::SingleCopy::kOn);
  const ShmSingleCopy::Tuning tuning{128, 1, 1000};  // at most 1000 bytes out of place
  // 300 floats (1200 bytes): out of place the slots, in place single copy; 250 floats (1000
  // bytes) out of place still single copy.
  const std::vector<Case> cases = {
      {DataType::kFloat32, ReduceOp::kSum, {}, {300}, false},
      {DataType::kFloat32, ReduceOp::kSum, {}, {300}, true},
      {DataType::kFloat32, ReduceOp::kSum, {}, {250}, false},
  };
  const auto expect = [](const Case& c) { return c.in_place || Bytes(c) <= 1000; };
  for (const std::string& failure : RunCases(job, tuning, cases, expect)) CHECK(failure == "");

  // Only rank 1 out of place, over the limit: every rank takes the slots, with the right sums.
  const std::vector<std::string> failures = RunOnRanks(n, [&](int r) -> std::string {
    ShmAllreduce allreduce(*job.planes[r], tuning);
    std::vector<float> in(300, 1.0f + r), out(300, -1.0f);
    const std::vector<ReduceSpan> spans = {{in.data(), r == 1 ? out.data() : in.data(), 300}};
    const Status s = allreduce.Run(spans, DataType::kFloat32, ReduceOp::kSum, {}, "mixed");
    if (!s.ok()) return s.ToString();
    if (allreduce.single_copy_ops() != 0) return "went straight between the tensors";
    const float sum = static_cast<float>(n * (n + 1) / 2);  // 1 + 2 + ... + n
    const std::vector<float>& result = r == 1 ? out : in;
    for (int i = 0; i < 300; ++i) {
      if (result[i] != sum) return "[" + std::to_string(i) + "] = " + std::to_string(result[i]);
    }
    return "";
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

}  // namespace
}  // namespace kolo::ops
