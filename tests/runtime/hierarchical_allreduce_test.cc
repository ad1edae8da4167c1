// The hierarchical allreduce (ops/hierarchical_allreduce.h) through the public API: four
// runtimes in one process (real gRPC, real loopback mesh) posing as two hosts of two ranks by
// their host names (KOLO_HOSTNAME), in consecutive, interleaved and "abba" placement, with shared
// memory or TCP within the host (KOLO_TRANSPORT auto or tcp). Results checked
// against the direct computation for every dtype and op, odd and tiny counts, fused groups,
// prescale and postscale, and bit for bit across the ranks; which path ran read from each rank's
// timeline (HIERARCHICAL_ALLREDUCE or RING_ALLREDUCE) for KOLO_HIERARCHICAL on, auto and off,
// Horovod's variable, and hosts with different numbers of ranks (flat).
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config_table.h"
#include "kolo/options.h"
#include "tests/support/allreduce_sweep.h"
#include "tests/support/host_placement.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::HasActivity;
using kolo::testing::KoloShmMappings;
using kolo::testing::LocalJob;
using kolo::testing::OnHosts;
using kolo::testing::View;
using kolo::testing::Watchdog;

namespace {

constexpr int kRanks = 4;

// Runs one allreduce of `small` and one of `large` float32 elements on every rank of a job on
// `placement` with `mode`, checks their results, shuts the job down and returns rank 0's
// timeline.
std::string TimelineOfTwoOps(const std::string& placement, Hierarchical mode, int64_t small,
                             int64_t large) {
  const kolo::testing::TempDir temp("kolo-hierarchical-test-");
  {
    LocalJob job(kRanks, OnHosts(placement, mode, Transport::kAuto, temp.File("t.json")));
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      for (int64_t count : {small, large}) {
        std::vector<uint8_t> data =
            kolo::testing::MakeInput(DataType::kFloat32, count, rt.rank(), ReduceOp::kSum);
        const std::string name = "ops/" + std::to_string(count);
        Status s = rt.Allreduce(name, View(data, DataType::kFloat32, count),
                                View(data, DataType::kFloat32, count));
        if (!s.ok()) return name + ": " + s.ToString();
        std::string error = kolo::testing::CheckAllreduce(data, DataType::kFloat32, count,
                                                          rt.size(), ReduceOp::kSum);
        if (!error.empty()) return name + ": " + error;
      }
      return "";
    });
    for (const std::string& failure : failures) CHECK(failure == "");
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  return kolo::testing::FileText(temp.File("t.rank0.json"));
}

}  // namespace

TEST_CASE(
    "Hierarchical allreduce over two hosts matches a direct computation for every dtype "
    "and op",
    "[runtime][allreduce][hierarchical]") {
  const std::string placement = GENERATE(as<std::string>(), "ab", "interleaved", "abba");
  // Within the host: shared memory (auto) or the TCP ring.
  const std::string transport = GENERATE(as<std::string>(), "auto", "tcp");
  Watchdog watchdog("hierarchical allreduce sweep, " + placement + ", " + transport,
                    std::chrono::seconds(120));
  const auto on_hosts = OnHosts(placement, Hierarchical::kOn, *TransportFromName(transport));
  LocalJob job(kRanks, [on_hosts](Options& options) {
    on_hosts(options);
    options.p2p = "off";  // point-to-point's rings are segments too: this counts the data plane's
  });
  // One segment per host, mapped by its two ranks; none over TCP.
  CHECK(KoloShmMappings() == (transport == "auto" ? kRanks : 0));
  // Fewer elements than a host's ranks (empty blocks), odd counts (blocks of different
  // sizes), and one past 2 MiB in 8-byte dtypes (sliced across hosts).
  const std::vector<int64_t> counts = {0, 1, 3, 13, 1001, (1 << 18) + 7};
  auto failures =
      job.RunOnAllRanks([&](Runtime& rt) { return kolo::testing::AllreduceSweep(rt, counts); });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE(
    "Hierarchical allreduce of fused tensors with prescale and postscale matches a direct "
    "computation",
    "[runtime][allreduce][hierarchical]") {
  Watchdog watchdog("hierarchical fused allreduce", std::chrono::seconds(60));
  LocalJob job(kRanks, OnHosts("interleaved", Hierarchical::kOn));
  const std::vector<int64_t> counts = {7, 1, 4099};
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    for (DataType dtype :
         {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        std::vector<std::string> names;
        std::vector<std::vector<uint8_t>> inputs, outputs;
        std::vector<TensorView> in_views, out_views;
        for (size_t t = 0; t < counts.size(); ++t) {
          names.push_back("fused/" + DataTypeName(dtype) + "/" + ReduceOpName(op) + "/" +
                          std::to_string(t));
          inputs.push_back(kolo::testing::MakeInput(dtype, counts[t], rt.rank(), op));
          outputs.emplace_back(inputs.back().size(), 0xAB);
        }
        for (size_t t = 0; t < counts.size(); ++t) {
          in_views.push_back(View(inputs[t], dtype, counts[t]));
          out_views.push_back(View(outputs[t], dtype, counts[t]));
        }
        // Exact in every dtype: the scaled values stay small integers.
        AllreduceOptions options;
        options.op = op;
        options.prescale = 2.0;
        options.postscale = 3.0;
        Status s = rt.GroupedAllreduce(names, in_views, out_views, options);
        if (!s.ok()) return names[0] + ": " + s.ToString();
        for (size_t t = 0; t < counts.size(); ++t) {
          for (int64_t i = 0; i < counts[t]; ++i) {
            double want = kolo::testing::ExpectedAllreduce(rt.size(), i, ReduceOp::kSum, dtype);
            want = op == ReduceOp::kAverage ? want * 2.0 * 3.0 / rt.size() : want * 6.0;
            if (op == ReduceOp::kAverage && !IsFloatingPoint(dtype)) {
              want = static_cast<double>(static_cast<int64_t>(want));
            }
            const double got = kolo::testing::ReadElement(outputs[t], dtype, i);
            if (got != want) {
              return names[t] + ": element " + std::to_string(i) + " is " + std::to_string(got) +
                     ", expected " + std::to_string(want);
            }
          }
        }
      }
    }
    return "";
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE(
    "KOLO_HIERARCHICAL chooses the hierarchical path by mode and size, and Horovod's "
    "variable is its alias",
    "[runtime][allreduce][hierarchical]") {
  Watchdog watchdog("hierarchical allreduce modes", std::chrono::seconds(120));
  // 1 KiB and 256 KiB of float32: below and above auto's threshold.
  const int64_t small = 256;
  const int64_t large = 1 << 16;
  SECTION("on: every allreduce") {
    const std::string timeline = TimelineOfTwoOps("ab", Hierarchical::kOn, small, large);
    CHECK(HasActivity(timeline, "HIERARCHICAL_ALLREDUCE"));
    CHECK_FALSE(HasActivity(timeline, "RING_ALLREDUCE"));
  }
  SECTION("auto: the large one only") {
    const std::string timeline = TimelineOfTwoOps("interleaved", Hierarchical::kAuto, small, large);
    CHECK(HasActivity(timeline, "HIERARCHICAL_ALLREDUCE"));
    CHECK(HasActivity(timeline, "RING_ALLREDUCE"));
  }
  SECTION("off: none") {
    const std::string timeline = TimelineOfTwoOps("ab", Hierarchical::kOff, small, large);
    CHECK_FALSE(HasActivity(timeline, "HIERARCHICAL_ALLREDUCE"));
    CHECK(HasActivity(timeline, "RING_ALLREDUCE"));
  }
  SECTION("HOROVOD_HIERARCHICAL_ALLREDUCE=1 and 0") {
    for (const char* value : {"1", "0"}) {
      StatusOr<Options> parsed = Options::FromMap({{"HOROVOD_HIERARCHICAL_ALLREDUCE", value}});
      REQUIRE(parsed.ok());
      const std::string timeline = TimelineOfTwoOps("ab", parsed->hierarchical, small, large);
      INFO("HOROVOD_HIERARCHICAL_ALLREDUCE=" << value);
      CHECK(HasActivity(timeline, "HIERARCHICAL_ALLREDUCE") == (std::string(value) == "1"));
      CHECK(HasActivity(timeline, "RING_ALLREDUCE") == (std::string(value) == "0"));
    }
  }
  SECTION("on, but hosts with different numbers of ranks: flat, and still right") {
    const std::string timeline = TimelineOfTwoOps("3+1", Hierarchical::kOn, small, large);
    CHECK_FALSE(HasActivity(timeline, "HIERARCHICAL_ALLREDUCE"));
    CHECK(HasActivity(timeline, "RING_ALLREDUCE"));
  }
}

TEST_CASE("Hierarchical allreduce gives every rank the same bits", "[runtime][hierarchical]") {
  const std::string transport = GENERATE(as<std::string>(), "auto", "tcp");
  Watchdog watchdog("hierarchical allreduce bits, " + transport, std::chrono::seconds(60));
  LocalJob job(kRanks, OnHosts("interleaved", Hierarchical::kOn, *TransportFromName(transport)));
  // Values whose float sums depend on the order of addition; an odd count over two hosts.
  const int64_t count = 3 * (1 << 17) + 5;
  std::vector<std::vector<float>> results(kRanks);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i) {
      data[i] = 1.0f / static_cast<float>(1 + (i * 7919 + rt.rank() * 104729) % 1000003);
    }
    AllreduceOptions options;
    options.op = ReduceOp::kAverage;
    Status s = rt.Allreduce("bits", {data.data(), DataType::kFloat32, {count}, Device::Cpu()},
                            {data.data(), DataType::kFloat32, {count}, Device::Cpu()}, options);
    if (!s.ok()) return s.ToString();
    results[rt.rank()] = std::move(data);
    return "";
  });
  for (const std::string& failure : failures) CHECK(failure == "");
  for (int r = 1; r < kRanks; ++r) {
    INFO("rank " << r);
    REQUIRE(results[r].size() == results[0].size());
    CHECK(std::memcmp(results[r].data(), results[0].data(), results[0].size() * sizeof(float)) ==
          0);
  }
}
