// The fast path for the ops besides allreduce (docs/FAST-PATH.md, "Which ops"): repeated
// broadcasts, allgathers, reducescatters and alltoalls through the public API with real ranks,
// agreed on in rounds instead of at the controller, exact on every rank; an allgather whose
// rows and an alltoall whose splits change on one rank; and the join rule (a joined rank stands
// in for allreduces only).
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;
using Clock = std::chrono::steady_clock;

namespace {

// How many of rank r's timeline ops of `op` ("BROADCAST", ...) completed without a controller
// sequence number, that is, as a round decided them.
int FastOpsOf(const std::string& path, int rank, const std::string& op) {
  std::ifstream in(path + ".rank" + std::to_string(rank));
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"seq\":0,") != std::string::npos &&
        line.find("\"name\":\"" + op + "\"") != std::string::npos) {
      ++count;
    }
  }
  return count;
}

// How many negotiation spans `span` ("NEGOTIATE_BROADCAST", ...) rank 0's timeline draws:
// the controller's and, for ops agreed on in rounds, the fast path's (core/timeline/round_trace.h).
int SpansOf(const std::string& path, const std::string& span) {
  std::ifstream in(path + ".rank0");
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("{\"name\":\"" + span + "\",\"ph\":\"B\"") != std::string::npos) ++count;
  }
  return count;
}

float ValueAt(int rank, int step, int64_t i) {
  return static_cast<float>(rank * 1000 + step * 10) + static_cast<float>(i % 7);
}

// Rows rank r sends to the allgather "rows": uneven, rank 1 none.
int64_t RowsOf(int rank) {
  return rank == 1 ? 0 : rank + 2;
}

// The same, but rank 2 sends 9.
int64_t MoreRowsOn2(int rank) {
  return rank == 2 ? 9 : RowsOf(rank);
}

// One step of a broadcast from the last rank, an allgather of uneven rows and a reducescatter,
// each checked against what every rank sent.
std::string Step(Runtime& rt, int step, int64_t (*rows_of)(int)) {
  const int n = rt.size();
  const int64_t cols = 3;
  const std::string at = "step " + std::to_string(step) + ": ";

  std::vector<float> cast(37);
  for (size_t i = 0; i < cast.size(); ++i) cast[i] = ValueAt(rt.rank(), step, i);
  TensorView c{cast.data(), DataType::kFloat32, {37}, Device::Cpu()};
  Status s = rt.Broadcast("cast", c, n - 1);
  if (!s.ok()) return at + "broadcast: " + s.ToString();
  for (size_t i = 0; i < cast.size(); ++i) {
    if (cast[i] != ValueAt(n - 1, step, i)) return at + "broadcast: wrong value";
  }

  std::vector<float> mine(static_cast<size_t>(rows_of(rt.rank()) * cols));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = ValueAt(rt.rank(), step, i);
  TensorView g{mine.data(), DataType::kFloat32, {rows_of(rt.rank()), cols}, Device::Cpu()};
  std::vector<float> gathered;
  std::vector<int64_t> shape;
  s = rt.Allgather("rows", g, [&](const std::vector<int64_t>& out_shape) -> void* {
    shape = out_shape;
    gathered.resize(static_cast<size_t>(out_shape[0] * out_shape[1]));
    return gathered.data();
  });
  if (!s.ok()) return at + "allgather: " + s.ToString();
  size_t k = 0;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < rows_of(r) * cols; ++i, ++k) {
      if (k >= gathered.size() || gathered[k] != ValueAt(r, step, i)) {
        return at + "allgather: wrong value at " + std::to_string(k);
      }
    }
  }
  if (k != gathered.size()) return at + "allgather: " + std::to_string(gathered.size()) + " values";

  const int64_t total_rows = 2 * n;
  std::vector<float> input(static_cast<size_t>(total_rows * cols));
  for (size_t i = 0; i < input.size(); ++i) input[i] = ValueAt(rt.rank(), step, i);
  std::vector<float> part(static_cast<size_t>(2 * cols), -1.0f);
  TensorView in{input.data(), DataType::kFloat32, {total_rows, cols}, Device::Cpu()};
  TensorView out{part.data(), DataType::kFloat32, {2, cols}, Device::Cpu()};
  s = rt.Reducescatter("scatter", in, out);
  if (!s.ok()) return at + "reducescatter: " + s.ToString();
  for (size_t i = 0; i < part.size(); ++i) {
    const int64_t at_input = rt.rank() * 2 * cols + static_cast<int64_t>(i);
    float want = 0;
    for (int r = 0; r < n; ++r) want += ValueAt(r, step, at_input);
    if (part[i] != want) return at + "reducescatter: wrong value at " + std::to_string(i);
  }
  // Alltoall: rank r sends rank d SplitOf(r, d) rows (through `rows_of`, so MoreRowsOn2 changes
  // rank 2's splits only); element i of that block is ValueAt(r, step, i) + 100 d.
  auto split_of = [&](int from, int to) { return rows_of(from) % 4 + (from + to) % 3 + 1; };
  std::vector<int64_t> splits;
  std::vector<float> sent;
  for (int d = 0; d < n; ++d) {
    splits.push_back(split_of(rt.rank(), d));
    for (int64_t i = 0; i < splits.back() * cols; ++i) {
      sent.push_back(ValueAt(rt.rank(), step, i) + 100.0f * static_cast<float>(d));
    }
  }
  const int64_t sent_rows = static_cast<int64_t>(sent.size()) / cols;
  std::vector<float> received;
  s = rt.Alltoall("swap", {sent.data(), DataType::kFloat32, {sent_rows, cols}, Device::Cpu()},
                  splits, [&](const std::vector<int64_t>& out_shape) -> void* {
                    received.resize(static_cast<size_t>(out_shape[0] * out_shape[1]));
                    return received.data();
                  });
  if (!s.ok()) return at + "alltoall: " + s.ToString();
  k = 0;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < split_of(r, rt.rank()) * cols; ++i, ++k) {
      const float want = ValueAt(r, step, i) + 100.0f * static_cast<float>(rt.rank());
      if (k >= received.size() || received[k] != want) {
        return at + "alltoall: wrong value at " + std::to_string(k);
      }
    }
  }
  if (k != received.size()) return at + "alltoall: " + std::to_string(received.size()) + " values";
  return "";
}

// Steps [first, end) of Step, stopping at the first failure.
std::string Steps(Runtime& rt, int first, int end, int64_t (*rows_of)(int)) {
  for (int step = first; step < end; ++step) {
    std::string failure = Step(rt, step, rows_of);
    if (!failure.empty()) return failure;
  }
  return "";
}

}  // namespace

TEST_CASE(
    "Repeated broadcasts, allgathers, reducescatters and alltoalls skip the controller and stay "
    "exact",
    "[runtime][fastpath]") {
  const std::string transport = GENERATE("shm", "tcp");
  Watchdog watchdog("fast path ops over " + transport, std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo_fast_path_ops_");
  const std::string path = temp.path() + "/trace";
  const int steps = 8;
  {
    LocalJob job(3, [&](Options& o) {
      o.transport = *TransportFromName(transport);
      o.timeline_path = path;
    });
    CHECK(job.RunOnAllRanks([&](Runtime& rt) { return Steps(rt, 0, steps, RowsOf); }) ==
          std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << " over " << transport);
    // Step 0 announces full metadata; from step 1 on each op is cached.
    CHECK(FastOpsOf(path, r, "BROADCAST") == steps - 1);
    CHECK(FastOpsOf(path, r, "ALLGATHER") == steps - 1);
    CHECK(FastOpsOf(path, r, "REDUCESCATTER") == steps - 1);
    CHECK(FastOpsOf(path, r, "ALLTOALL") == steps - 1);
  }
  // Every step's negotiation is drawn under its own op, whichever path agreed on it.
  for (const char* span : {"NEGOTIATE_BROADCAST", "NEGOTIATE_ALLGATHER", "NEGOTIATE_REDUCESCATTER",
                           "NEGOTIATE_ALLTOALL"}) {
    INFO(span);
    CHECK(SpansOf(path, span) == steps);
  }
}

TEST_CASE(
    "An allgather whose rows and an alltoall whose splits change on one rank meet the others at "
    "the controller at once and are exact",
    "[runtime][fastpath]") {
  Watchdog watchdog("fast path allgather rows change", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo_fast_path_ops_");
  const std::string path = temp.path() + "/trace";
  std::vector<double> seconds(3, -1);
  {
    LocalJob job(3, [&](Options& o) { o.timeline_path = path; });
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      std::string failure = Steps(rt, 0, 3, RowsOf);
      if (!failure.empty()) return failure;
      // Rank 2 sends more rows from now on; the others' cached copies must not wait for a round.
      const auto start = Clock::now();
      failure = Step(rt, 3, MoreRowsOn2);
      seconds[rt.rank()] = std::chrono::duration<double>(Clock::now() - start).count();
      if (!failure.empty()) return failure;
      return Steps(rt, 4, 7, MoreRowsOn2);
    });
    CHECK(failures == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  // Well under the 1 s after which a waiting cached op goes to the controller anyway.
  for (double s : seconds) CHECK(s < 0.9);
  // Back on the fast path after the change: the allgather at once under its fresh id (steps
  // 1-2 and 4-6), the alltoall once its new splits came twice (steps 1-2 and 5-6).
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(FastOpsOf(path, r, "ALLGATHER") == 5);
    CHECK(FastOpsOf(path, r, "ALLTOALL") == 4);
  }
}

TEST_CASE(
    "A cached broadcast while other ranks have joined fails naming the join, and the job goes "
    "on",
    "[runtime][fastpath][join]") {
  Watchdog watchdog("fast path broadcast and join", std::chrono::seconds(60));
  LocalJob job(3);
  double seconds = -1;  // rank 0's broadcast that fails
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<float> x(5, static_cast<float>(rt.rank()));
    TensorView v{x.data(), DataType::kFloat32, {5}, Device::Cpu()};
    for (int step = 0; step < 3; ++step) {
      Status s = rt.Broadcast("x", v, 0);
      if (!s.ok()) return "warm-up: " + s.ToString();
    }
    if (rt.rank() != 0) {  // out of data
      StatusOr<int> last = rt.Join();
      return last.ok() && *last == 0 ? "" : "join: " + last.status().ToString();
    }
    const auto start = Clock::now();
    Status s = rt.Broadcast("x", v, 0);
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (s.code() != StatusCode::kFailedPrecondition ||
        s.message().find("join supports only allreduce") == std::string::npos) {
      return "expected the broadcast to fail naming the join, got " + s.ToString();
    }
    StatusOr<int> last = rt.Join();
    return last.ok() ? "" : "join: " + last.status().ToString();
  });
  CHECK(failures == std::vector<std::string>{});
  // It waits for a round at most the fast path's patience (1 s), then the controller decides.
  CHECK(seconds < 5);
}
