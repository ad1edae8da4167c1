// Alltoall through the public API, over real gRPC and loopback sockets: even and uneven
// splits (zero rows included), every dtype, received splits, and argument errors; through the
// host's shared memory (SHM_ALLTOALL in the timeline) and pairwise over TCP
// (KOLO_TRANSPORT=tcp, PAIRWISE_ALLTOALL); on runtimes posing as two hosts, pairwise.
#include <catch2/catch.hpp>

#include "tests/support/element_codec.h"
#include "tests/support/host_placement.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/timeline_text.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

using kolo::testing::kAllDataTypes;

// Rows rank `from` sends rank `to`; pattern 0 is the even split (splits left empty).
int64_t Rows(int from, int to, int pattern) {
  if (pattern == 0) return 2;
  if (pattern == 1) return (from + 2 * to) % 3;  // uneven, zeros included
  return 97 + from * 5 + to;                     // larger blocks
}

// The value rank `from` puts in element i of the block it sends to `to` (0 or 1 for bool).
double Value(DataType dtype, int from, int to, int64_t i) {
  const int64_t v = (from * 7 + to * 3 + i) % 11;
  return static_cast<double>(dtype == DataType::kBool ? v % 2 : v);
}

std::string CheckAlltoall(Runtime& rt, DataType dtype, int pattern, int64_t cols) {
  const int n = rt.size();
  const int me = rt.rank();
  std::vector<int64_t> splits;
  int64_t rows = 0;
  for (int to = 0; to < n; ++to) {
    splits.push_back(Rows(me, to, pattern));
    rows += splits.back();
  }
  const size_t esize = DataTypeSize(dtype);
  std::vector<uint8_t> input(static_cast<size_t>(rows * cols) * esize);
  int64_t at = 0;
  for (int to = 0; to < n; ++to) {
    for (int64_t i = 0; i < splits[to] * cols; ++i) {
      kolo::testing::StoreElement(dtype, input.data(), static_cast<size_t>(at++),
                                  Value(dtype, me, to, i));
    }
  }
  std::vector<uint8_t> output;
  std::vector<int64_t> received;
  const std::string name = DataTypeName(dtype) + "/" + std::to_string(pattern);
  Status s = rt.Alltoall(
      name, {input.data(), dtype, {rows, cols}, Device::Cpu()},
      pattern == 0 ? std::vector<int64_t>{} : splits,
      [&](const std::vector<int64_t>& shape) -> void* {
        output.resize(static_cast<size_t>(shape[0] * shape[1]) * esize + 1);
        return output.data();
      },
      &received);
  if (!s.ok()) return name + ": " + s.ToString();
  at = 0;
  for (int from = 0; from < n; ++from) {
    if (received[from] != Rows(from, me, pattern)) {
      return name + ": received " + std::to_string(received[from]) + " rows from rank " +
             std::to_string(from);
    }
    for (int64_t i = 0; i < received[from] * cols; ++i) {
      if (kolo::testing::ReadElement(output, dtype, at++) != Value(dtype, from, me, i)) {
        return name + ": wrong element " + std::to_string(i) + " from rank " + std::to_string(from);
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Alltoall delivers every rank's block for every other rank", "[runtime][alltoall]") {
  const int n = GENERATE(1, 2, 3, 4);
  // One host: through shared memory (auto) or pairwise over TCP.
  const Transport transport = GENERATE(Transport::kAuto, Transport::kTcp);
  const bool shm = transport == Transport::kAuto && n > 1;
  Watchdog watchdog("alltoall sweep with " + std::to_string(n) + " ranks" + (shm ? ", shm" : ""),
                    std::chrono::seconds(90));
  const kolo::testing::TempDir temp("kolo-alltoall-test-");
  {
    LocalJob job(n, [&](Options& options) {
      options.transport = transport;
      options.timeline_path = temp.File("t.json");
    });
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      for (DataType dtype : kAllDataTypes) {
        for (int pattern = 0; pattern < 3; ++pattern) {
          std::string e = CheckAlltoall(rt, dtype, pattern, pattern == 2 ? 257 : 3);
          if (!e.empty()) return e;
        }
      }
      return "";
    });
    CHECK(failures == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  const std::string timeline = kolo::testing::FileText(temp.File("t.rank0.json"));
  CHECK(kolo::testing::HasActivity(timeline, "SHM_ALLTOALL") == shm);
  CHECK(kolo::testing::HasActivity(timeline, "PAIRWISE_ALLTOALL") == !shm);
}

TEST_CASE("Alltoall across hosts runs pairwise, hierarchy or not",
          "[runtime][alltoall][hierarchical]") {
  // The hosts' shared memory serves the hierarchical collectives; alltoall stays pairwise over
  // TCP (docs/SCALE.md, "Not yet").
  const Hierarchical mode = GENERATE(Hierarchical::kAuto, Hierarchical::kOn);
  Watchdog watchdog("alltoall across hosts", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo-alltoall-test-");
  {
    LocalJob job(4, kolo::testing::OnHosts("abba", mode, Transport::kAuto, temp.File("t.json")));
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      return CheckAlltoall(rt, DataType::kFloat32, 2, 1024);  // 400 KiB and more a rank
    });
    CHECK(failures == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  const std::string timeline = kolo::testing::FileText(temp.File("t.rank1.json"));
  CHECK(kolo::testing::HasActivity(timeline, "PAIRWISE_ALLTOALL"));
  CHECK_FALSE(kolo::testing::HasActivity(timeline, "SHM_ALLTOALL"));
}

TEST_CASE("Alltoall argument errors fail at enqueue; inner dimensions everywhere",
          "[runtime][alltoall][errors]") {
  Watchdog watchdog("alltoall errors", std::chrono::seconds(60));
  LocalJob job(2);
  float x[12] = {0};
  auto alloc = [](const std::vector<int64_t>&) -> void* { return nullptr; };
  TensorView three{x, DataType::kFloat32, {3, 2}, Device::Cpu()};
  auto enqueue = [&](const std::vector<int64_t>& splits) {
    return job.rank(0).AlltoallAsync("a", three, splits, alloc, nullptr, [](const Status&) {});
  };
  CHECK_THAT(enqueue({}).message(), Catch::Contains("do not split evenly"));
  CHECK_THAT(enqueue({1}).message(), Catch::Contains("1 splits for 2 ranks"));
  CHECK_THAT(enqueue({1, 1}).message(), Catch::Contains("add up to 2 rows but the input has 3"));
  CHECK_THAT(enqueue({4, -1}).message(), Catch::Contains("negative"));

  std::vector<std::string> messages(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    float y[12] = {0};
    std::vector<float> out(64);
    auto into_out = [&](const std::vector<int64_t>&) -> void* { return out.data(); };
    TensorView v{y, DataType::kFloat32, {2, rt.rank() == 0 ? 3 : 2}, Device::Cpu()};
    Status s = rt.Alltoall("inner", v, {}, into_out);
    messages[rt.rank()] = s.message();
    if (s.code() != StatusCode::kMismatch) return "expected a mismatch, got " + s.ToString();
    TensorView w{y, DataType::kFloat32, {2, 3}, Device::Cpu()};
    s = rt.Alltoall("after", w, {}, into_out);
    return s.ok() ? "" : "job did not go on: " + s.ToString();
  });
  CHECK(failures == std::vector<std::string>{});
  CHECK(messages[0] == messages[1]);
  CHECK_THAT(messages[0], Catch::Contains("alltoall inner dimensions"));
}

TEST_CASE("Alltoall: an allocator that returns null for an empty output is not a failure",
          "[runtime][alltoall]") {
  const int n = GENERATE(1, 2, 3, 4);
  Watchdog watchdog("alltoall into nothing with " + std::to_string(n) + " ranks",
                    std::chrono::seconds(60));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    // Every rank sends all its rows to rank 0: the others receive [0, 2] and allocate from an
    // empty vector, whose data() may be null.
    const int64_t rows = rt.rank() + 1;
    std::vector<float> input(static_cast<size_t>(rows * 2), static_cast<float>(rt.rank()));
    std::vector<int64_t> splits(static_cast<size_t>(n), 0);
    splits[0] = rows;
    std::vector<float> output;
    std::vector<int64_t> received;
    Status s = rt.Alltoall(
        "to/0", {input.data(), DataType::kFloat32, {rows, 2}, Device::Cpu()}, splits,
        [&](const std::vector<int64_t>& shape) -> void* {
          output.resize(static_cast<size_t>(shape[0] * shape[1]));
          return output.data();
        },
        &received);
    if (!s.ok()) return s.ToString();
    if (rt.rank() != 0)
      return output.empty() ? "" : "rank " + std::to_string(rt.rank()) + " got rows";
    size_t at = 0;
    for (int from = 0; from < n; ++from) {
      if (received[from] != from + 1) return "wrong received splits";
      for (int64_t i = 0; i < 2 * (from + 1); ++i) {
        if (output[at++] != from) return "wrong data from rank " + std::to_string(from);
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}
