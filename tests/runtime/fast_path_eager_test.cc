// Eager allreduces (docs/FAST-PATH.md, "Eager"): a small cached allreduce whose inputs every
// rank's round message carried runs from them, without the data plane. Through the public API
// with real thread-ranks: the results equal the data plane's bit for bit and are the same on
// every rank, for each dtype, reduce op and scaling; an op whose input some rank did not send
// (its KOLO_EAGER_BYTES is 0, or the op is over the budget) runs through the data plane.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "ops/half.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

// How many ops rank r's timeline shows run eagerly.
int EagerOps(const std::string& path, int rank) {
  return kolo::testing::CountOf(kolo::testing::FileText(path + ".rank" + std::to_string(rank)),
                                "EAGER_ALLREDUCE");
}

struct Case {
  DataType dtype;
  ReduceOp op;
  double prescale = 1.0;
  double postscale = 1.0;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (DataType dtype :
       {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kFloat16}) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      cases.push_back({dtype, op});
    }
    cases.push_back({dtype, ReduceOp::kSum, 0.5, 3.0});
    cases.push_back({dtype, ReduceOp::kAverage, 3.0, 0.25});
  }
  return cases;
}

// Rank r's input of `n` elements: small values, of both signs, exact in every dtype.
std::vector<uint8_t> Input(DataType dtype, int rank, size_t n) {
  std::vector<uint8_t> bytes(n * DataTypeSize(dtype));
  for (size_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(static_cast<int>((i * 7 + rank * 3) % 9) - 4) * 0.75 +
                     (dtype == DataType::kInt32 ? 0.25 * rank : 0.0);
    uint8_t* at = bytes.data() + i * DataTypeSize(dtype);
    if (dtype == DataType::kFloat32) {
      const float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
    } else if (dtype == DataType::kFloat64) {
      std::memcpy(at, &v, 8);
    } else if (dtype == DataType::kInt32) {
      const int32_t k = static_cast<int32_t>(v * 4);
      std::memcpy(at, &k, 4);
    } else {
      const uint16_t h = ops::FloatToHalf(static_cast<float>(v));
      std::memcpy(at, &h, 2);
    }
  }
  return bytes;
}

// Every case of Cases(), `repeats` times each (the first goes to the controller, the next are
// cached), of `elements` elements, in place; the last result of each case, concatenated.
std::string RunCases(Runtime& rt, size_t elements, int repeats, std::vector<uint8_t>* results) {
  const std::vector<Case> cases = Cases();
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    std::vector<uint8_t> data;
    for (int i = 0; i < repeats; ++i) {
      data = Input(k.dtype, rt.rank(), elements);
      TensorView v{data.data(), k.dtype, {static_cast<int64_t>(elements)}, Device::Cpu()};
      AllreduceOptions options;
      options.op = k.op;
      options.prescale = k.prescale;
      options.postscale = k.postscale;
      const Status s = rt.Allreduce("case/" + std::to_string(c), v, v, options);
      if (!s.ok()) return "case " + std::to_string(c) + ": " + s.ToString();
    }
    results->insert(results->end(), data.begin(), data.end());
  }
  return "";
}

// Runs RunCases on a job of `size` ranks (`eager_bytes` on each rank, by rank) with a timeline
// at `path`; returns each rank's results. Over shared memory unless `transport` says.
std::vector<std::vector<uint8_t>> RunJob(int size, const std::vector<int64_t>& eager_bytes,
                                         const std::string& path, size_t elements,
                                         Transport transport = Transport::kAuto) {
  std::vector<std::vector<uint8_t>> results(size);
  LocalJob job(size, [&](Options& o) {
    o.fast_path = true;
    o.eager_bytes = static_cast<int>(eager_bytes[o.rank]);
    o.timeline_path = path;
    o.transport = transport;
  });
  CHECK(job.RunOnAllRanks([&](Runtime& rt) {
    return RunCases(rt, elements, 3, &results[rt.rank()]);
  }) == std::vector<std::string>{});
  for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  return results;
}

}  // namespace

TEST_CASE("Eager allreduces give the data plane's bits on every rank, every dtype, op and scale",
          "[runtime][fastpath][eager]") {
  const int size = GENERATE(2, 3, 4);
  Watchdog watchdog("eager allreduce, " + std::to_string(size) + " ranks",
                    std::chrono::seconds(90));
  const kolo::testing::TempDir temp("kolo_eager_");
  const std::string eager_path = temp.path() + "/eager";
  const std::string plane_path = temp.path() + "/plane";
  // 37 elements: not a whole number of cache lines in any dtype.
  const auto eager = RunJob(size, std::vector<int64_t>(size, 4096), eager_path, 37);
  const auto plane = RunJob(size, std::vector<int64_t>(size, 0), plane_path, 37);
  const size_t cases = Cases().size();
  for (int r = 0; r < size; ++r) {
    INFO("rank " << r);
    CHECK(eager[r] == eager[0]);
    CHECK(eager[r] == plane[r]);
    // Each case's second and third op ran eagerly (the first went to the controller).
    CHECK(EagerOps(eager_path, r) == static_cast<int>(2 * cases));
    CHECK(EagerOps(plane_path, r) == 0);
  }
}

TEST_CASE("An allreduce whose input some rank did not send runs through the data plane",
          "[runtime][fastpath][eager]") {
  Watchdog watchdog("eager allreduce, mixed", std::chrono::seconds(90));
  const kolo::testing::TempDir temp("kolo_eager_mixed_");
  const std::string mixed_path = temp.path() + "/mixed";
  const std::string plane_path = temp.path() + "/plane";
  const std::string cap_path = temp.path() + "/cap";
  // Rank 1 sends no inputs: nothing runs eagerly, and every result is still right.
  const auto mixed = RunJob(3, {4096, 0, 4096}, mixed_path, 37);
  const auto plane = RunJob(3, {0, 0, 0}, plane_path, 37);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(mixed[r] == plane[r]);
    CHECK(EagerOps(mixed_path, r) == 0);
  }
  // A budget of 128 bytes a message: 37 elements of 4 or 8 bytes do not fit, of 2 do: only the
  // float16 cases' ops run eagerly.
  const auto capped = RunJob(2, {128, 128}, cap_path, 37);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(capped[r] == capped[0]);
    CHECK(EagerOps(cap_path, r) == 2 * 7);
  }
}

TEST_CASE("KOLO_EAGER_BYTES unset sends inputs over TCP rounds, not through shared memory",
          "[runtime][fastpath][eager]") {
  Watchdog watchdog("eager allreduce, auto", std::chrono::seconds(90));
  const kolo::testing::TempDir temp("kolo_eager_auto_");
  const std::string tcp_path = temp.path() + "/tcp";
  const std::string shm_path = temp.path() + "/shm";
  const auto tcp = RunJob(2, {-1, -1}, tcp_path, 37, Transport::kTcp);
  const auto shm = RunJob(2, {-1, -1}, shm_path, 37, Transport::kShm);
  const int cases = static_cast<int>(Cases().size());
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(tcp[r] == shm[r]);
    CHECK(EagerOps(tcp_path, r) == 2 * cases);
    CHECK(EagerOps(shm_path, r) == 0);
  }
}
