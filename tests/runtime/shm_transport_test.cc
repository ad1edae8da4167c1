// Allreduce, broadcast and allgather over the shared-memory data plane through the public API:
// N runtimes in one process (real gRPC, real loopback mesh, a real POSIX shared-memory segment),
// with KOLO_TRANSPORT=shm and auto, and KOLO_SHM_SINGLE_COPY=on and off (the slots alone);
// results checked against the direct computation and compared bit for bit across ranks and
// across the two paths; broadcast and allgather over shm and tcp alike (allgather's path read
// from the timeline); the transport choice visible in the process's mappings; shm refused for a
// job that spans hosts.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/config/config_table.h"
#include "tests/support/allreduce_sweep.h"
#include "tests/support/cross_memory_attach.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::KoloShmMappings;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

using kolo::testing::View;

// KOLO_SHM_SINGLE_COPY for the tests of single copy: on (whether the ranks have cores or not,
// which auto would ask) where this process may use cross-memory attach; else auto, which then
// falls back, and the test says so.
std::string SingleCopyOn() {
  if (kolo::testing::CrossMemoryAttachWorks()) return "on";
  WARN("process_vm_readv is refused in this environment: single copy is not tested here");
  return "auto";
}

std::function<void(Options&)> WithTransport(const std::string& transport,
                                            const std::string& single_copy = "auto") {
  return [transport, single_copy](Options& options) {
    options.transport = *TransportFromName(transport);
    // Point-to-point's rings are segments too: this file counts the data plane's.
    options.p2p = "off";
    options.shm_single_copy = single_copy == "on"    ? ShmSingleCopy::kOn
                              : single_copy == "off" ? ShmSingleCopy::kOff
                                                     : ShmSingleCopy::kAuto;
  };
}

}  // namespace

TEST_CASE("Allreduce over shared memory matches a direct computation for every dtype and op",
          "[runtime][allreduce][shm]") {
  const int n = GENERATE(1, 2, 3, 4);
  const std::string transport = GENERATE(as<std::string>(), "shm", "auto");
  const std::string single_copy = GENERATE(as<std::string>(), "on", "off");
  Watchdog watchdog("shm allreduce sweep, " + transport + ", single copy " + single_copy + ", " +
                        std::to_string(n) + " ranks",
                    std::chrono::seconds(180));
  LocalJob job(n, WithTransport(transport, single_copy == "on" ? SingleCopyOn() : single_copy));
  // One segment mapped by every rank; none for a one-rank job left on auto.
  CHECK(KoloShmMappings() == (transport == "auto" && n == 1 ? 0 : n));
  // 1 MiB slots: the largest count takes several chunks in every dtype but uint8/int8. From
  // 256 KiB (the 1-byte dtypes' largest count too) single copy takes them, where it is on.
  const std::vector<int64_t> counts = {0, 1, 13, 1000 * n + 1, 65537, 3 * (1 << 18) + 7};
  auto failures =
      job.RunOnAllRanks([&](Runtime& rt) { return kolo::testing::AllreduceSweep(rt, counts); });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("Allreduce over shared memory gives every rank the same bits, on either path",
          "[runtime][shm]") {
  const int n = GENERATE(2, 3, 4);
  Watchdog watchdog("shm allreduce bits, " + std::to_string(n) + " ranks",
                    std::chrono::seconds(120));
  // Values whose float sums depend on the order of addition, over several chunks; more than
  // 8 MiB, so the slot path streams the results out (ops/shm_allreduce.cc), to an unaligned
  // output. Single copy (on) and the slots (off) must give the same bits.
  const int64_t count = 9 * (1 << 18) + 3;
  std::map<std::string, std::vector<std::vector<float>>> by_path;
  for (const std::string& single_copy : {SingleCopyOn(), std::string("off")}) {
    LocalJob job(n, WithTransport("shm", single_copy));
    std::vector<std::vector<float>>& results = by_path[single_copy];
    results.resize(n);
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      std::vector<float> input(count);
      for (int64_t i = 0; i < count; ++i) {
        input[i] = 1.0f / static_cast<float>(1 + (i * 7919 + rt.rank() * 104729) % 1000003);
      }
      std::vector<float> output_storage(count + 1);
      float* output = output_storage.data() + 1;
      // Prescale 1: each rank reduces its slice straight from its input; 0.3: from its slot,
      // where the prescaled values were copied (ops/shm_allreduce.h).
      for (const auto& [op, prescale] : {std::pair{ReduceOp::kSum, 1.0},
                                         {ReduceOp::kAverage, 1.0},
                                         {ReduceOp::kSum, 0.3},
                                         {ReduceOp::kAverage, 0.3}}) {
        AllreduceOptions options;
        options.op = op;
        options.prescale = prescale;
        Status s = rt.Allreduce("bits/" + ReduceOpName(op) + "/" + std::to_string(prescale),
                                {input.data(), DataType::kFloat32, {count}, Device::Cpu()},
                                {output, DataType::kFloat32, {count}, Device::Cpu()}, options);
        if (!s.ok()) return s.ToString();
        // Against a sum in double (the bits are compared across ranks below).
        for (int64_t i = 0; i < count; ++i) {
          double want = 0;
          for (int r = 0; r < rt.size(); ++r) {
            want += static_cast<double>(static_cast<float>(
                prescale * (1.0f / static_cast<float>(1 + (i * 7919 + r * 104729) % 1000003))));
          }
          if (op == ReduceOp::kAverage) want /= rt.size();
          if (std::abs(output[i] - want) > 1e-5 * std::abs(want)) {
            return ReduceOpName(op) + ": element " + std::to_string(i) + " is " +
                   std::to_string(output[i]) + ", expected about " + std::to_string(want);
          }
        }
        results[rt.rank()].insert(results[rt.rank()].end(), output, output + count);
      }
      return "";
    });
    for (const std::string& failure : failures) CHECK(failure == "");
  }
  for (const auto& [path, results] : by_path) {
    for (int r = 0; r < n; ++r) {
      INFO("single copy " << path << ", rank " << r << " against rank 0 with single copy off");
      REQUIRE(results[r].size() == by_path.at("off")[0].size());
      CHECK(std::memcmp(results[r].data(), by_path.at("off")[0].data(),
                        results[r].size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("A fused allreduce over shared memory reduces slices that cross tensors and chunks",
          "[runtime][allreduce][shm]") {
  const int n = GENERATE(2, 3, 4);
  const std::string single_copy = GENERATE(as<std::string>(), "on", "off");
  Watchdog watchdog(
      "shm fused allreduce, " + std::to_string(n) + " ranks, single copy " + single_copy,
      std::chrono::seconds(60));
  LocalJob job(n, WithTransport("shm", single_copy == "on" ? SingleCopyOn() : single_copy));
  // One fused buffer of several chunks (1 MiB slots), or of several pieces (single copy),
  // whose per-rank slices start and end inside tensors, so each rank's own slice comes from
  // pieces of several inputs.
  const std::vector<int64_t> counts = {1, 3 * (1 << 18) + 5, 17, 1000, 2 * (1 << 18) + 1, 3};
  const DataType dtype = DataType::kFloat32;
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    for (const bool in_place : {false, true}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAverage}) {
        std::vector<std::vector<uint8_t>> inputs, outputs;
        std::vector<TensorView> in_views, out_views;
        std::vector<std::string> names;
        for (size_t t = 0; t < counts.size(); ++t) {
          inputs.push_back(kolo::testing::MakeInput(dtype, counts[t], rt.rank(), op));
          outputs.emplace_back(inputs.back().size(), 0xAB);
          names.push_back("fused/" + ReduceOpName(op) + (in_place ? "/in/" : "/out/") +
                          std::to_string(t));
        }
        for (size_t t = 0; t < counts.size(); ++t) {
          in_views.push_back(View(inputs[t], dtype, counts[t]));
          out_views.push_back(View(in_place ? inputs[t] : outputs[t], dtype, counts[t]));
        }
        AllreduceOptions options;
        options.op = op;
        Status s = rt.GroupedAllreduce(names, in_views, out_views, options);
        if (!s.ok()) return names[0] + ": " + s.ToString();
        for (size_t t = 0; t < counts.size(); ++t) {
          std::string error = kolo::testing::CheckAllreduce(in_place ? inputs[t] : outputs[t],
                                                            dtype, counts[t], rt.size(), op);
          if (!error.empty()) return names[t] + ": " + error;
        }
      }
    }
    return "";
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("Broadcast over shared memory and over TCP delivers the root's bytes, chunk by chunk",
          "[runtime][broadcast][shm]") {
  const int n = GENERATE(2, 3, 4);
  const std::string transport = GENERATE(as<std::string>(), "shm", "tcp");
  Watchdog watchdog("broadcast over " + transport + ", " + std::to_string(n) + " ranks",
                    std::chrono::seconds(60));
  LocalJob job(n, WithTransport(transport));
  // Up to several 1 MiB slots, and a size that ends mid-slot.
  const std::vector<int64_t> counts = {0, 1, 1031, 3 * (1 << 18) + 5};
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    for (int root = 0; root < rt.size(); ++root) {
      for (int64_t count : counts) {
        for (DataType dtype : {DataType::kUInt8, DataType::kFloat32, DataType::kFloat64}) {
          const std::string name =
              "b/" + DataTypeName(dtype) + "/" + std::to_string(root) + "/" + std::to_string(count);
          std::vector<uint8_t> data =
              kolo::testing::MakeInput(dtype, count, rt.rank(), ReduceOp::kSum);
          const std::vector<uint8_t> expected =
              kolo::testing::MakeInput(dtype, count, root, ReduceOp::kSum);
          Status s = rt.Broadcast(name, View(data, dtype, count), root);
          if (!s.ok()) return name + ": " + s.ToString();
          if (data != expected) return name + ": result differs from the root's input";
        }
      }
    }
    return "";
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("Allgather over shared memory and over TCP gathers uneven blocks, alone and fused",
          "[runtime][allgather][shm]") {
  const int n = GENERATE(2, 3, 4);
  const std::string transport = GENERATE(as<std::string>(), "shm", "tcp");
  Watchdog watchdog("allgather over " + transport + ", " + std::to_string(n) + " ranks",
                    std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo-shm-allgather-test-");
  {
    LocalJob job(n, [&](Options& options) {
      WithTransport(transport)(options);
      options.timeline_path = temp.File("t.json");
    });
    // Rows of 1031 float32 a rank: none on rank 1, a few, and blocks past a 1 MiB slot.
    auto rows = [](int rank, int pattern) -> int64_t {
      if (pattern == 0) return rank == 1 ? 0 : rank + 1;
      return 300 + 40 * rank + pattern;
    };
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      std::string failure;  // the first; every rank goes on, so none waits for another
      for (int tensors : {1, 2}) {
        for (int pattern = 0; pattern < 2; ++pattern) {
          std::vector<std::string> names;
          std::vector<std::vector<uint8_t>> inputs(2), outputs(2);
          std::vector<TensorView> views;
          std::vector<Allocator> allocators;
          for (int t = 0; t < tensors; ++t) {
            const int64_t count = rows(rt.rank(), pattern + t) * 1031;
            names.push_back("g/" + std::to_string(tensors) + "/" + std::to_string(pattern) + "/" +
                            std::to_string(t));
            inputs[t] =
                kolo::testing::MakeInput(DataType::kFloat32, count, rt.rank(), ReduceOp::kSum);
            views.push_back(
                {inputs[t].data(), DataType::kFloat32, {count / 1031, 1031}, Device::Cpu()});
            allocators.push_back([&outputs, t](const std::vector<int64_t>& shape) -> void* {
              outputs[t].assign(static_cast<size_t>(shape[0] * shape[1]) * 4, 0xEE);
              return outputs[t].data();
            });
          }
          Status s = tensors == 1 ? rt.Allgather(names[0], views[0], allocators[0])
                                  : rt.GroupedAllgather(names, views, allocators);
          if (!s.ok() && failure.empty()) failure = names[0] + ": " + s.ToString();
          for (int t = 0; t < tensors && s.ok(); ++t) {
            std::vector<uint8_t> expected;
            for (int r = 0; r < rt.size(); ++r) {
              std::vector<uint8_t> part = kolo::testing::MakeInput(
                  DataType::kFloat32, rows(r, pattern + t) * 1031, r, ReduceOp::kSum);
              expected.insert(expected.end(), part.begin(), part.end());
            }
            if (outputs[t] != expected && failure.empty()) failure = names[t] + ": wrong bytes";
          }
        }
      }
      return failure;
    });
    for (const std::string& failure : failures) CHECK(failure == "");
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  const std::string timeline = kolo::testing::FileText(temp.File("t.rank1.json"));
  CHECK(kolo::testing::HasActivity(timeline, "SHM_ALLGATHER") == (transport == "shm"));
  CHECK(kolo::testing::HasActivity(timeline, "RING_ALLGATHER") == (transport == "tcp"));
}

TEST_CASE("KOLO_TRANSPORT=tcp keeps allreduce off shared memory", "[runtime][shm]") {
  Watchdog watchdog("tcp transport", std::chrono::seconds(60));
  LocalJob job(2, WithTransport("tcp"));
  CHECK(KoloShmMappings() == 0);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<uint8_t> data =
        kolo::testing::MakeInput(DataType::kFloat32, 1001, rt.rank(), ReduceOp::kSum);
    Status s = rt.Allreduce("tcp", View(data, DataType::kFloat32, 1001),
                            View(data, DataType::kFloat32, 1001), {});
    if (!s.ok()) return s.ToString();
    return kolo::testing::CheckAllreduce(data, DataType::kFloat32, 1001, 2, ReduceOp::kSum);
  });
  for (const std::string& failure : failures) CHECK(failure == "");
}

TEST_CASE("KOLO_TRANSPORT=shm fails init for a job that spans hosts", "[runtime][shm]") {
  Watchdog watchdog("shm across hosts", std::chrono::seconds(60));
  const int port = kolo::testing::PickFreePort();
  std::vector<std::optional<StatusOr<std::unique_ptr<Runtime>>>> created(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Options options;
      options.rank = r;
      options.size = 2;
      options.controller_address = "127.0.0.1:" + std::to_string(port);
      options.secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
      options.timeout_seconds = 10;
      options.start_timeout_seconds = 20;
      options.host = r == 0 ? "host-a" : "host-b";
      options.transport = Transport::kShm;
      created[r] = Runtime::Create(options);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    REQUIRE_FALSE(created[r]->ok());
    CHECK_THAT(created[r]->status().message(),
               Catch::Contains("KOLO_TRANSPORT=shm needs every rank on one host, but this host "
                               "has 1 of the 2 ranks"));
  }
  CHECK(KoloShmMappings() == 0);
}
