// Process sets on the fast path (docs/FAST-PATH.md, "Process sets"): a set's repeated ops are
// agreed on in the job's rounds instead of at the controller, with every rank outside the set
// answering for it; overlapping sets and the job's own ops interleave in one order, every
// result exact; a rank outside the set that has nothing to do does not hold the set up; and a
// member's join sends the set's ops to the controller instead of leaving them to wait. Real
// ranks as threads over real gRPC, shared memory and loopback TCP.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
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

TensorView View(std::vector<float>& v, std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  return TensorView{v.data(), DataType::kFloat32, std::move(shape), Device::Cpu()};
}

std::string Add(Runtime& rt, const std::vector<int>& ranks, int* id) {
  StatusOr<int> added = rt.AddProcessSet(ranks);
  if (!added.ok()) return "add_process_set: " + added.status().ToString();
  *id = *added;
  return "";
}

// Three allreduces of `name` with `elements` floats in `set` (the caller's scope), each member
// sending its rank + 1 and expecting `sum`: from the second on the name's id is cached, so the
// next op of it takes the fast path. "" or the failure.
std::string CacheInSet(Runtime& rt, const std::string& name, size_t elements, float sum) {
  std::vector<float> x(elements);
  for (int step = 0; step < 3; ++step) {
    std::fill(x.begin(), x.end(), static_cast<float>(rt.rank() + 1));
    Status s = rt.Allreduce(name, View(x), View(x));
    if (!s.ok() || x[0] != sum) {
      return name + " step " + std::to_string(step) + ": " + s.ToString() + ", " +
             std::to_string(x[0]);
    }
  }
  return "";
}

float ValueAt(int rank, int step, int64_t i) {
  return static_cast<float>(rank * 1000 + step * 10) + static_cast<float>(i % 7);
}

// How many of rank r's timeline ops of `op` on a tensor of process set `set` completed without
// a controller sequence number, that is, as a round decided them. An op's end names its track
// (`pid` and `tid`), whose metadata names the tensor (and "<tensor> #2" a second track of it, where
// two of its spans overlapped).
int FastSetOpsOf(const std::string& path, int rank, const std::string& op, int set) {
  std::ifstream in(path + ".rank" + std::to_string(rank));
  const std::string scope = "[process set " + std::to_string(set) + "]";
  auto track_of = [](const std::string& line) {  // "pid":P,"tid":T (rank 0 draws two pids)
    const size_t at = line.find("\"pid\":");
    const size_t tid = line.find("\"tid\":", at);
    if (at == std::string::npos || tid == std::string::npos) return std::string();
    return line.substr(at, line.find(',', tid) - at);
  };
  std::set<std::string> tracks;  // of the set's tensors
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"thread_name\"") != std::string::npos &&
        line.find(scope) != std::string::npos) {
      tracks.insert(track_of(line));
    } else if (line.find("\"seq\":0,") != std::string::npos &&
               line.find("\"name\":\"" + op + "\"") != std::string::npos &&
               tracks.count(track_of(line)) != 0) {
      ++count;
    }
  }
  return count;
}

// Set a = {0, 1}: an allreduce and an allgather of uneven rows. Set b = {1, 2, 3}: a broadcast
// from job rank 3 and a reducescatter. The job: an allreduce. Rank 1, in both sets, enqueues
// one set's ops first on even steps and the other's on odd ones; every result is checked.
std::string Step(Runtime& rt, int a, int b, int step) {
  const int r = rt.rank();
  const std::string at = "rank " + std::to_string(r) + " step " + std::to_string(step) + ": ";
  std::vector<float> g(5, static_cast<float>(r + step));
  std::vector<float> ar(9), cast(11), rs_in(6 * 2), rs_out(2 * 2, -1.0f), gathered;
  std::vector<float> rows(static_cast<size_t>((r + 1) * 2));
  for (size_t i = 0; i < ar.size(); ++i) ar[i] = ValueAt(r, step, i);
  for (size_t i = 0; i < cast.size(); ++i) cast[i] = ValueAt(r, step, i);
  for (size_t i = 0; i < rs_in.size(); ++i) rs_in[i] = ValueAt(r, step, i);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = ValueAt(r, step, i);
  std::vector<Handle> handles;
  auto keep = [&](StatusOr<Handle> h, const char* what) -> std::string {
    if (!h.ok()) return at + what + ": " + h.status().ToString();
    handles.push_back(*h);
    return "";
  };
  auto enqueue_a = [&]() -> std::string {
    ProcessSetScope scope(a);
    std::string failed = keep(rt.AllreduceAsync("ar", View(ar), View(ar)), "allreduce in a");
    if (!failed.empty()) return failed;
    return keep(rt.AllgatherAsync("rows", View(rows, {r + 1, 2}),
                                  [&](const std::vector<int64_t>& shape) -> void* {
                                    gathered.resize(static_cast<size_t>(shape[0] * shape[1]));
                                    return gathered.data();
                                  }),
                "allgather in a");
  };
  auto enqueue_b = [&]() -> std::string {
    ProcessSetScope scope(b);
    std::string failed = keep(rt.BroadcastAsync("cast", View(cast), 3), "broadcast in b");
    if (!failed.empty()) return failed;
    return keep(rt.ReducescatterAsync("rs", View(rs_in, {6, 2}), View(rs_out, {2, 2})),
                "reducescatter in b");
  };
  std::string failed;
  const bool a_first = step % 2 == 0;
  if (failed.empty() && r <= 1 && a_first) failed = enqueue_a();
  if (failed.empty() && r >= 1) failed = enqueue_b();
  if (failed.empty() && r <= 1 && !a_first) failed = enqueue_a();
  if (failed.empty()) failed = keep(rt.AllreduceAsync("g", View(g), View(g)), "allreduce");
  for (Handle h : handles) {
    Status s = synchronize(h);
    if (!s.ok() && failed.empty()) failed = at + s.ToString();
  }
  if (!failed.empty()) return failed;

  if (g[4] != static_cast<float>(0 + 1 + 2 + 3 + 4 * step)) return at + "allreduce: wrong";
  if (r <= 1) {
    for (size_t i = 0; i < ar.size(); ++i) {
      if (ar[i] != ValueAt(0, step, i) + ValueAt(1, step, i)) return at + "allreduce in a";
    }
    size_t k = 0;
    for (int from = 0; from <= 1; ++from) {
      for (int64_t i = 0; i < (from + 1) * 2; ++i, ++k) {
        if (k >= gathered.size() || gathered[k] != ValueAt(from, step, i)) {
          return at + "allgather in a: wrong at " + std::to_string(k);
        }
      }
    }
    if (k != gathered.size()) return at + "allgather in a: " + std::to_string(k) + " values";
  }
  if (r >= 1) {
    for (size_t i = 0; i < cast.size(); ++i) {
      if (cast[i] != ValueAt(3, step, i)) return at + "broadcast in b: wrong";
    }
    const int64_t place = r - 1;  // within b
    for (size_t i = 0; i < rs_out.size(); ++i) {
      const int64_t in = place * 4 + static_cast<int64_t>(i);
      const float want = ValueAt(1, step, in) + ValueAt(2, step, in) + ValueAt(3, step, in);
      if (rs_out[i] != want) return at + "reducescatter in b: wrong at " + std::to_string(i);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Repeated ops of overlapping sets are agreed on in rounds and stay exact",
          "[runtime][process_sets][fastpath]") {
  const std::string transport = GENERATE("shm", "tcp");
  Watchdog watchdog("process sets on the fast path over " + transport, std::chrono::seconds(90));
  const kolo::testing::TempDir temp("kolo_set_fast_path_");
  const std::string path = temp.path() + "/trace";
  const int steps = 8;
  int a = -1, b = -1;
  {
    LocalJob job(4, [&](Options& o) {
      o.transport = *TransportFromName(transport);
      o.timeline_path = path;
    });
    CHECK(job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      int set_a = -1, set_b = -1;
      std::string failed = Add(rt, {0, 1}, &set_a);
      if (failed.empty()) failed = Add(rt, {1, 2, 3}, &set_b);
      for (int step = 0; failed.empty() && step < steps; ++step) {
        failed = Step(rt, set_a, set_b, step);
      }
      if (rt.rank() == 0) {
        a = set_a;
        b = set_b;
      }
      return failed;
    }) == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  // Step 0 announces full metadata; from step 1 on every op of a set is cached, and a round
  // decides it (its timeline op carries no controller sequence number).
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << " over " << transport);
    CHECK(FastSetOpsOf(path, r, "ALLREDUCE", a) == (r <= 1 ? steps - 1 : 0));
    CHECK(FastSetOpsOf(path, r, "ALLGATHER", a) == (r <= 1 ? steps - 1 : 0));
    CHECK(FastSetOpsOf(path, r, "BROADCAST", b) == (r >= 1 ? steps - 1 : 0));
    CHECK(FastSetOpsOf(path, r, "REDUCESCATTER", b) == (r >= 1 ? steps - 1 : 0));
  }
}

TEST_CASE("A rank outside the set with nothing to do answers the set's rounds at once",
          "[runtime][process_sets][fastpath]") {
  Watchdog watchdog("an idle rank outside a set", std::chrono::seconds(60));
  const int steps = 40;
  LocalJob job(3);
  CHECK(job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int set = -1;
    std::string failed = Add(rt, {0, 1}, &set);
    if (!failed.empty()) return failed;
    if (rt.rank() == 2) return "";  // idle until shutdown: its thread sleeps between rounds
    ProcessSetScope scope(set);
    std::vector<float> x(4);
    Status s = rt.Allreduce("warm", View(x), View(x));  // teaches rank 2 the id
    const Clock::time_point start = Clock::now();
    for (int step = 0; s.ok() && step < steps; ++step) {
      std::fill(x.begin(), x.end(), static_cast<float>(rt.rank() + step));
      s = rt.Allreduce("warm", View(x), View(x));
      if (s.ok() && x[3] != static_cast<float>(1 + 2 * step)) return "wrong sum";
    }
    if (!s.ok()) return s.ToString();
    // Answering only at its idle wait's 200 ms tick would take 8 s; waiting for the patience
    // and the controller, 40 s.
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return seconds < 5.0 ? ""
                         : std::to_string(steps) + " steps took " + std::to_string(seconds) + " s";
  }) == std::vector<std::string>{});
}

TEST_CASE("While a member's join of a set is in flight, the set's cached ops go to the controller",
          "[runtime][process_sets][fastpath][join]") {
  Watchdog watchdog("a join in a set on the fast path", std::chrono::seconds(60));
  const int steps = 6;
  LocalJob job(3);
  CHECK(job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int set = -1;
    std::string failed = Add(rt, {1, 2}, &set);
    if (!failed.empty() || rt.rank() == 0) return failed;
    ProcessSetScope scope(set);
    failed = CacheInSet(rt, "x", 3, 2.0f + 3.0f);
    if (!failed.empty()) return failed;
    std::vector<float> x(3);
    if (rt.rank() == 2) {
      StatusOr<int> last = rt.Join();
      return last.ok() && *last == 1 ? "" : "join: " + last.status().ToString();
    }
    // Rank 2 joined: its zeros stand in. Had rank 2 not diverted the set's ids, the first of
    // these would wait out the fast path's patience (1 s) before going to the controller.
    const Clock::time_point start = Clock::now();
    for (int step = 0; step < steps; ++step) {
      std::fill(x.begin(), x.end(), 5.0f);
      Status s = rt.Allreduce("x", View(x), View(x));
      if (!s.ok() || x[0] != 5.0f) return "after the join: " + s.ToString();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (seconds >= 0.8)
      return std::to_string(steps) + " steps took " + std::to_string(seconds) + " s";
    StatusOr<int> last = rt.Join();
    return last.ok() && *last == 1 ? "" : "join: " + last.status().ToString();
  }) == std::vector<std::string>{});
}

TEST_CASE("Removing a set while a member's cached op waits for a round fails naming the op",
          "[runtime][process_sets][fastpath][errors]") {
  Watchdog watchdog("removing a set with a cached op waiting", std::chrono::seconds(60));
  LocalJob job(3);
  CHECK(job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int set = -1;
    std::string failed = Add(rt, {0, 1}, &set);
    if (!failed.empty()) return failed;
    if (rt.rank() != 2) {
      ProcessSetScope scope(set);
      failed = CacheInSet(rt, "w", 2, 1.0f + 2.0f);
      if (!failed.empty()) return failed;
    }
    std::vector<float> w(2);
    // Rank 0's next instance waits on the fast path, where the controller does not see it;
    // the removal must fail as it does for an op the controller holds.
    std::optional<Handle> pending;
    std::fill(w.begin(), w.end(), static_cast<float>(rt.rank() + 1));
    if (rt.rank() == 0) {
      ProcessSetScope scope(set);
      StatusOr<Handle> h = rt.AllreduceAsync("w", View(w), View(w));
      if (!h.ok()) return "w: " + h.status().ToString();
      pending = *h;
    }
    Status removed = rt.RemoveProcessSet(set);
    if (removed.code() != StatusCode::kFailedPrecondition ||
        removed.message().find("'w [process set 1]'") == std::string::npos ||
        removed.message().find("in flight") == std::string::npos) {
      return "removal with a cached op waiting: " + removed.ToString();
    }
    if (rt.rank() == 1) {
      ProcessSetScope scope(set);
      Status s = rt.Allreduce("w", View(w), View(w));
      if (!s.ok() || w[0] != 3.0f) return "w on rank 1: " + s.ToString();
    }
    if (pending) {
      Status s = synchronize(*pending);
      if (!s.ok() || w[0] != 3.0f) return "w on rank 0: " + s.ToString();
    }
    removed = rt.RemoveProcessSet(set);
    return removed.ok() ? "" : "removal: " + removed.ToString();
  }) == std::vector<std::string>{});
}

TEST_CASE("A cached op of a set whose shape changes on one member fails on every member at once",
          "[runtime][process_sets][fastpath][errors]") {
  Watchdog watchdog("a changed shape in a set on the fast path", std::chrono::seconds(60));
  LocalJob job(3);
  CHECK(job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int set = -1;
    std::string failed = Add(rt, {1, 2}, &set);
    if (!failed.empty() || rt.rank() == 0) return failed;
    ProcessSetScope scope(set);
    failed = CacheInSet(rt, "shape", 4, 2.0f + 3.0f);
    if (!failed.empty()) return failed;
    std::vector<float> x(4);
    // Rank 2's tensor grows: its full metadata meets rank 1's cached copy at the controller,
    // not after the fast path's patience.
    std::vector<float> y(rt.rank() == 2 ? 6 : 4, 1.0f);
    const Clock::time_point start = Clock::now();
    Status s = rt.Allreduce("shape", View(y), View(y));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (s.code() != StatusCode::kMismatch ||
        s.message().find("'shape [process set 1]'") == std::string::npos ||
        s.message().find("whose members are ranks [1, 2]") == std::string::npos) {
      return s.ToString();
    }
    if (seconds >= 0.8) return "the mismatch took " + std::to_string(seconds) + " s";
    // The set goes on: the next op of the right shape runs.
    std::fill(x.begin(), x.end(), 1.0f);
    s = rt.Allreduce("after", View(x), View(x));
    return s.ok() && x[0] == 2.0f ? "" : "after the mismatch: " + s.ToString();
  }) == std::vector<std::string>{});
}

TEST_CASE("Rank 0's timeline draws a set's rounds, counting only the set's members as ready",
          "[runtime][process_sets][fastpath][timeline]") {
  Watchdog watchdog("a set's rounds on the timeline", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo_set_rounds_trace_");
  const std::string path = temp.path() + "/trace";
  const int steps = 6;
  {
    // Set {1, 2}: rank 0, which draws the negotiations, and rank 3 are not in it.
    LocalJob job(4, [&](Options& o) { o.timeline_path = path; });
    CHECK(job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      int set = -1;
      std::string failed = Add(rt, {1, 2}, &set);
      if (!failed.empty() || rt.rank() == 0 || rt.rank() == 3) return failed;
      ProcessSetScope scope(set);
      std::vector<float> x(4);
      for (int step = 0; step < steps; ++step) {
        std::fill(x.begin(), x.end(), static_cast<float>(rt.rank()));
        Status s = rt.Allreduce("x", View(x), View(x));
        if (!s.ok() || x[0] != 3.0f) return "step " + std::to_string(step) + ": " + s.ToString();
      }
      return "";
    }) == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  // The controller process's track of the tensor: one NEGOTIATE_ALLREDUCE a step (the first
  // the controller's, the others the rounds'), ticks from ranks 1 and 2 only (job ranks, from
  // the controller as from the rounds), and every span ending with one of them as the last
  // rank ready.
  std::ifstream in(path + ".rank0");
  std::string track;
  int spans = 0;
  std::set<std::string> ticks, last_ranks;
  for (std::string line; std::getline(in, line);) {
    const size_t tid = line.find("\"tid\":");
    if (line.find("\"pid\":1000000,") == std::string::npos || tid == std::string::npos) continue;
    const std::string here = line.substr(tid, line.find(',', tid) - tid);
    if (line.find("\"thread_name\"") != std::string::npos &&
        line.find("\"x [process set 1]\"") != std::string::npos) {
      track = here;
    } else if (!track.empty() && here == track) {
      if (line.find("\"name\":\"NEGOTIATE_ALLREDUCE\",\"ph\":\"B\"") != std::string::npos) ++spans;
      if (line.find("\"ph\":\"i\"") != std::string::npos) {
        const size_t at = line.find("\"name\":\"") + 8;
        ticks.insert(line.substr(at, line.find('"', at) - at));
      }
      const size_t last = line.find("\"last_rank\":");
      if (last != std::string::npos) {
        last_ranks.insert(line.substr(last + 12, line.find('}', last) - last - 12));
      }
    }
  }
  CHECK(spans == steps);
  CHECK(ticks == std::set<std::string>{"1", "2"});
  CHECK(last_ranks.size() >= 1);
  for (const std::string& last : last_ranks) CHECK((last == "1" || last == "2"));
}
