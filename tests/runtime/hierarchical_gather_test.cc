// The hierarchical broadcast and allgather (ops/hierarchical_gather.h) through the public API:
// runtimes in one process (real gRPC, real loopback mesh) posing as hosts by their host names
// (KOLO_HOSTNAME): 2 hosts of 2 ranks in consecutive and interleaved placement and 3 hosts of
// 2, with shared memory or TCP within the host. Results are checked byte for byte against what
// every rank sent, from every root, for empty, odd and multi-slot sizes (the shared-memory step
// cuts a rank's share of several blocks into 1 MiB chunks across block edges), single and fused
// allgathers with uneven first dimensions (zero rows included); which path ran is read from
// each rank's timeline (HIERARCHICAL_BROADCAST / CHAIN_BROADCAST, HIERARCHICAL_ALLGATHER /
// RING_ALLGATHER) for KOLO_HIERARCHICAL on, auto (allgathers by size, broadcasts flat) and off.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "kolo/options.h"
#include "tests/support/host_placement.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::HasActivity;
using kolo::testing::LocalJob;
using kolo::testing::OnHosts;
using kolo::testing::RanksOf;
using kolo::testing::Watchdog;

namespace {

// Bytes that differ by rank and position, so a block in the wrong place or from the wrong rank
// shows.
std::vector<uint8_t> Pattern(int rank, size_t bytes, int salt) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    data[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(rank) * 17 + salt * 7) % 251);
  }
  return data;
}

// Broadcasts `counts` float32 tensors from every root; "" or the first wrong result. A rank goes
// on after a wrong result, so that the others' ops do not wait for it.
std::string BroadcastFromEveryRoot(Runtime& rt, const std::vector<int64_t>& counts) {
  std::string first_failure;
  auto fail = [&first_failure](const std::string& text) {
    if (first_failure.empty()) first_failure = text;
  };
  for (int root = 0; root < rt.size(); ++root) {
    for (int64_t count : counts) {
      const size_t bytes = static_cast<size_t>(count) * 4;
      const int salt = static_cast<int>(count % 97);
      std::vector<uint8_t> data =
          rt.rank() == root ? Pattern(root, bytes, salt) : std::vector<uint8_t>(bytes, 0xEE);
      const std::string name = "bcast/" + std::to_string(root) + "/" + std::to_string(count);
      Status s =
          rt.Broadcast(name, {data.data(), DataType::kFloat32, {count}, Device::Cpu()}, root);
      if (!s.ok()) {
        fail(name + ": " + s.ToString());
      } else if (data != Pattern(root, bytes, salt)) {
        fail(name + ": wrong bytes");
      }
    }
  }
  return first_failure;
}

// Rows of rank r in allgather pattern `pattern`: uneven, one rank empty, or blocks of
// 400 KiB-1 MiB (1024 float32 columns) that make each rank's share span slot chunks.
int64_t Rows(int rank, int pattern) {
  switch (pattern) {
    case 0:
      return rank == 1 ? 0 : rank + 2;
    case 1:
      return 3 + 5 * rank;
    default:
      return 100 + 50 * rank;
  }
}
int64_t Cols(int pattern) {
  return pattern == 2 ? 1024 : 7;
}

// Allgathers `tensors` tensors as one group (fused when more than one), each in every pattern
// in turn; "" or the first wrong result (going on after it, as BroadcastFromEveryRoot).
std::string AllgatherPatterns(Runtime& rt, int tensors) {
  std::string first_failure;
  for (int pattern = 0; pattern < 3; ++pattern) {
    std::vector<std::string> names;
    std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(tensors));
    std::vector<std::vector<uint8_t>> outputs(static_cast<size_t>(tensors));
    std::vector<TensorView> views;
    std::vector<Allocator> allocators;
    for (int t = 0; t < tensors; ++t) {
      const int64_t rows = Rows(rt.rank(), pattern) + t;
      inputs[t] = Pattern(rt.rank(), static_cast<size_t>(rows * Cols(pattern)) * 4, t);
      names.push_back("gather/" + std::to_string(tensors) + "/" + std::to_string(pattern) + "/" +
                      std::to_string(t));
      views.push_back({inputs[t].data(), DataType::kFloat32, {rows, Cols(pattern)}, Device::Cpu()});
      allocators.push_back([&outputs, t](const std::vector<int64_t>& shape) -> void* {
        outputs[t].assign(static_cast<size_t>(shape[0] * shape[1]) * 4, 0xEE);
        return outputs[t].data();
      });
    }
    Status s = tensors == 1 ? rt.Allgather(names[0], views[0], allocators[0])
                            : rt.GroupedAllgather(names, views, allocators);
    if (!s.ok() && first_failure.empty()) first_failure = names[0] + ": " + s.ToString();
    for (int t = 0; t < tensors && s.ok() && first_failure.empty(); ++t) {
      std::vector<uint8_t> expected;
      for (int r = 0; r < rt.size(); ++r) {
        const int64_t rows = Rows(r, pattern) + t;
        std::vector<uint8_t> part = Pattern(r, static_cast<size_t>(rows * Cols(pattern)) * 4, t);
        expected.insert(expected.end(), part.begin(), part.end());
      }
      if (outputs[t] != expected) first_failure = names[t] + ": wrong bytes";
    }
  }
  return first_failure;
}

}  // namespace

TEST_CASE("Hierarchical broadcast delivers the root's bytes from every root",
          "[runtime][broadcast][hierarchical]") {
  const std::string placement = GENERATE(as<std::string>(), "ab", "interleaved", "abc");
  const std::string transport = GENERATE(as<std::string>(), "auto", "tcp");
  Watchdog watchdog("hierarchical broadcast, " + placement + ", " + transport,
                    std::chrono::seconds(120));
  const kolo::testing::TempDir temp("kolo-hierarchical-gather-test-");
  {
    LocalJob job(RanksOf(placement), OnHosts(placement, Hierarchical::kOn,
                                             *TransportFromName(transport), temp.File("t.json")));
    // Empty, one element, odd, and past two 1 MiB slots.
    const std::vector<int64_t> counts = {0, 1, 1001, (1 << 19) + 7};
    auto failures =
        job.RunOnAllRanks([&](Runtime& rt) { return BroadcastFromEveryRoot(rt, counts); });
    for (const std::string& failure : failures) CHECK(failure == "");
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  const std::string timeline = kolo::testing::FileText(temp.File("t.rank1.json"));
  CHECK(HasActivity(timeline, "HIERARCHICAL_BROADCAST"));
  CHECK_FALSE(HasActivity(timeline, "CHAIN_BROADCAST"));
}

TEST_CASE("Hierarchical allgather gathers uneven blocks in rank order, alone and fused",
          "[runtime][allgather][hierarchical]") {
  const std::string placement = GENERATE(as<std::string>(), "ab", "interleaved", "abc", "abba");
  const std::string transport = GENERATE(as<std::string>(), "auto", "tcp");
  Watchdog watchdog("hierarchical allgather, " + placement + ", " + transport,
                    std::chrono::seconds(120));
  const kolo::testing::TempDir temp("kolo-hierarchical-gather-test-");
  {
    LocalJob job(RanksOf(placement), OnHosts(placement, Hierarchical::kOn,
                                             *TransportFromName(transport), temp.File("t.json")));
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      const std::string alone = AllgatherPatterns(rt, 1);
      const std::string fused = AllgatherPatterns(rt, 3);
      return alone.empty() ? fused : alone;
    });
    for (const std::string& failure : failures) CHECK(failure == "");
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  const std::string timeline = kolo::testing::FileText(temp.File("t.rank2.json"));
  CHECK(HasActivity(timeline, "HIERARCHICAL_ALLGATHER"));
  CHECK_FALSE(HasActivity(timeline, "RING_ALLGATHER"));
}

TEST_CASE(
    "KOLO_HIERARCHICAL chooses the hierarchical allgather by mode and size, the hierarchical "
    "broadcast with on only",
    "[runtime][hierarchical]") {
  Watchdog watchdog("hierarchical broadcast and allgather modes", std::chrono::seconds(120));
  // 4 KiB and 256 KiB of float32: below and above auto's threshold.
  const int64_t small = 1024;
  const int64_t large = 1 << 16;
  auto run = [&](Hierarchical mode) {
    const kolo::testing::TempDir temp("kolo-hierarchical-gather-test-");
    {
      LocalJob job(4, OnHosts("ab", mode, Transport::kAuto, temp.File("t.json")));
      auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
        std::string failure;
        for (int64_t count : {small, large}) {
          const std::string broadcast = BroadcastFromEveryRoot(rt, {count});
          if (failure.empty()) failure = broadcast;
          // Every rank's block a quarter of the total.
          std::vector<uint8_t> in = Pattern(rt.rank(), static_cast<size_t>(count), 1), out;
          TensorView view{in.data(), DataType::kFloat32, {count / 4}, Device::Cpu()};
          const std::string name = "gather/" + std::to_string(count);
          Status s = rt.Allgather(name, view, [&out](const std::vector<int64_t>& shape) -> void* {
            out.resize(static_cast<size_t>(shape[0]) * 4);
            return out.data();
          });
          if (!s.ok() && failure.empty()) failure = name + ": " + s.ToString();
          for (int r = 0; r < rt.size() && s.ok(); ++r) {
            const std::vector<uint8_t> part = Pattern(r, static_cast<size_t>(count), 1);
            if (!std::equal(part.begin(), part.end(), out.begin() + r * count) && failure.empty()) {
              failure = name + ": wrong bytes from rank " + std::to_string(r);
            }
          }
        }
        return failure;
      });
      for (const std::string& failure : failures) CHECK(failure == "");
      for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
    }
    return kolo::testing::FileText(temp.File("t.rank3.json"));
  };
  SECTION("on: every one") {
    const std::string timeline = run(Hierarchical::kOn);
    CHECK(HasActivity(timeline, "HIERARCHICAL_BROADCAST"));
    CHECK(HasActivity(timeline, "HIERARCHICAL_ALLGATHER"));
    CHECK_FALSE(HasActivity(timeline, "CHAIN_BROADCAST"));
    CHECK_FALSE(HasActivity(timeline, "RING_ALLGATHER"));
  }
  SECTION("auto: the large allgather only; broadcasts flat") {
    const std::string timeline = run(Hierarchical::kAuto);
    CHECK_FALSE(HasActivity(timeline, "HIERARCHICAL_BROADCAST"));
    CHECK(HasActivity(timeline, "HIERARCHICAL_ALLGATHER"));
    CHECK(HasActivity(timeline, "CHAIN_BROADCAST"));
    CHECK(HasActivity(timeline, "RING_ALLGATHER"));
  }
  SECTION("off: none") {
    const std::string timeline = run(Hierarchical::kOff);
    CHECK_FALSE(HasActivity(timeline, "HIERARCHICAL_BROADCAST"));
    CHECK_FALSE(HasActivity(timeline, "HIERARCHICAL_ALLGATHER"));
    CHECK(HasActivity(timeline, "CHAIN_BROADCAST"));
    CHECK(HasActivity(timeline, "RING_ALLGATHER"));
  }
}
