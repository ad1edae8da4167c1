// Process sets (README, "Process sets"): collectives among subsets of the ranks, added and
// removed collectively, scoped names, concurrency between sets, the errors, and the static
// sets of KOLO_PROCESS_SETS. Real ranks as threads over real gRPC and loopback TCP.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/local_job.h"
#include "tests/support/rank_threads.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

TensorView View(std::vector<float>& v) {
  return TensorView{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::Cpu()};
}

std::string Text(const std::vector<float>& v) {
  std::string out;
  for (float x : v) out += std::to_string(x) + " ";
  return out;
}

// Adds the same set on every rank; "" or the failure.
std::string Add(Runtime& rt, const std::vector<int>& ranks, int* id) {
  StatusOr<int> added = rt.AddProcessSet(ranks);
  if (!added.ok()) return "add_process_set: " + added.status().ToString();
  *id = *added;
  return "";
}

}  // namespace

TEST_CASE("Two disjoint sets run allreduces at the same time, each among its members",
          "[runtime][process_sets]") {
  Watchdog watchdog("disjoint process sets", std::chrono::seconds(90));
  LocalJob job(4);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int low = -1, high = -1;
    std::string failed = Add(rt, {1, 0}, &low);  // any order: the set is sorted
    if (failed.empty()) failed = Add(rt, {2, 3}, &high);
    if (!failed.empty()) return failed;
    if (low != 1 || high != 2) return "ids " + std::to_string(low) + ", " + std::to_string(high);
    const bool in_low = rt.rank() < 2;
    const int mine = in_low ? low : high;
    // Rank and size within a set.
    if (rt.ProcessSetRank(mine) != rt.rank() % 2 || rt.ProcessSetSize(mine) != 2 ||
        rt.ProcessSetRank(in_low ? high : low) != -1 || rt.ProcessSetSize(0) != 4 ||
        rt.ProcessSetRank(0) != rt.rank() || rt.ProcessSetSize(99) != -1) {
      return "rank/size within sets wrong";
    }
    if (rt.ProcessSetRanks(high) != std::vector<int>{2, 3}) return "ranks of the high set";
    // The sets run different numbers of steps under the same name: a rank of one set never
    // waits for the other set.
    const int steps = in_low ? 7 : 3;
    for (int step = 0; step < steps; ++step) {
      std::vector<float> g(1000, static_cast<float>(rt.rank() + 1 + step));
      ProcessSetScope scope(mine);
      Status s = rt.Allreduce("grad", View(g), View(g));
      if (!s.ok()) return "step " + std::to_string(step) + ": " + s.ToString();
      const float want = (in_low ? 1 + 2 : 3 + 4) + 2.0f * static_cast<float>(step);
      if (g[0] != want || g[999] != want) {
        return "step " + std::to_string(step) + ": got " + std::to_string(g[0]) + ", want " +
               std::to_string(want);
      }
    }
    // The same name in the global set is another op.
    std::vector<float> all(3, 1.0f);
    Status s = rt.Allreduce("grad", View(all), View(all));
    if (!s.ok() || all[2] != 4.0f) return "global grad: " + s.ToString();
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("A set's pending op never holds up another set", "[runtime][process_sets]") {
  Watchdog watchdog("independent process sets", std::chrono::seconds(60));
  LocalJob job(4);
  std::atomic<bool> high_done{false};
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int low = -1, high = -1;
    std::string failed = Add(rt, {0, 1}, &low);
    if (failed.empty()) failed = Add(rt, {2, 3}, &high);
    if (!failed.empty()) return failed;
    std::vector<float> x(16, 1.0f);
    if (rt.rank() >= 2) {
      // Set {2, 3} runs to the end while set {0, 1} has an op that rank 1 has not submitted.
      ProcessSetScope scope(high);
      for (int step = 0; step < 20; ++step) {
        x.assign(16, 1.0f);
        Status s = rt.Allreduce("busy", View(x), View(x));
        if (!s.ok() || x[0] != 2.0f) return "busy: " + s.ToString();
      }
      if (rt.rank() == 2) high_done = true;
      return "";
    }
    ProcessSetScope scope(low);
    if (rt.rank() == 1) {
      while (!high_done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    Status s = rt.Allreduce("waits", View(x), View(x));
    return s.ok() && x[0] == 2.0f ? "" : "waits: " + s.ToString();
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Overlapping sets with ops submitted in different orders per rank do not deadlock",
          "[runtime][process_sets]") {
  Watchdog watchdog("overlapping process sets", std::chrono::seconds(90));
  LocalJob job(4);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int a = -1, b = -1, c = -1;
    std::string failed = Add(rt, {0, 1}, &a);
    if (failed.empty()) failed = Add(rt, {2, 3}, &b);
    if (failed.empty()) failed = Add(rt, {0, 2, 3}, &c);
    if (!failed.empty()) return failed;
    const int r = rt.rank();
    for (int round = 0; round < 5; ++round) {
      std::vector<int> order;  // the sets this rank is in, in an order that differs per rank
      if (r < 2) order.push_back(a);
      if (r >= 2) order.push_back(b);
      if (r != 1) order.push_back(c);
      if ((r + round) % 2 == 1) std::reverse(order.begin(), order.end());
      std::vector<std::vector<float>> data(order.size());
      std::vector<Handle> handles;
      for (size_t i = 0; i < order.size(); ++i) {
        data[i].assign(64, static_cast<float>(r + 1));
        ProcessSetScope scope(order[i]);
        StatusOr<Handle> h =
            rt.AllreduceAsync("x" + std::to_string(round), View(data[i]), View(data[i]));
        if (!h.ok()) return "enqueue: " + h.status().ToString();
        handles.push_back(*h);
      }
      for (size_t i = 0; i < order.size(); ++i) {
        Status s = synchronize(handles[i]);
        if (!s.ok()) return "round " + std::to_string(round) + ": " + s.ToString();
        const float want = order[i] == a ? 1 + 2 : order[i] == b ? 3 + 4 : 1 + 3 + 4;
        if (data[i][63] != want) {
          return "round " + std::to_string(round) + " set " + std::to_string(order[i]) + ": got " +
                 Text({data[i][63]}) + "want " + std::to_string(want);
        }
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Every op runs on a set of 3 of 4 ranks, ranks counting within the set",
          "[runtime][process_sets]") {
  Watchdog watchdog("every op in a process set", std::chrono::seconds(90));
  LocalJob job(4);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int set = -1;
    std::string failed = Add(rt, {0, 2, 3}, &set);
    if (!failed.empty()) return failed;
    if (rt.rank() == 1) {
      // Not a member: the set's ops never involve this rank; the global barrier waits.
      return rt.Barrier().ok() ? "" : "barrier";
    }
    ProcessSetScope scope(set);
    const int me = rt.ProcessSetRank(set);  // 0, 1, 2 for job ranks 0, 2, 3
    if (me != (rt.rank() == 0 ? 0 : rt.rank() - 1)) return "set rank " + std::to_string(me);
    // allreduce: job ranks 0, 2, 3 contribute 1, 3, 4.
    std::vector<float> sum(5, static_cast<float>(rt.rank() + 1));
    Status s = rt.Allreduce("sum", View(sum), View(sum));
    if (!s.ok() || sum[4] != 8.0f) return "allreduce: " + s.ToString() + " " + Text(sum);
    AllreduceOptions avg;
    avg.op = ReduceOp::kAverage;
    std::vector<float> mean(2, static_cast<float>(3 * me));
    s = rt.Allreduce("mean", View(mean), View(mean), avg);
    if (!s.ok() || mean[0] != 3.0f) return "average: " + s.ToString() + " " + Text(mean);
    // allgather: set rank i sends i + 1 rows of value i.
    std::vector<float> rows(static_cast<size_t>(me + 1), static_cast<float>(me));
    std::vector<float> gathered;
    s = rt.Allgather("rows", View(rows), [&](const std::vector<int64_t>& shape) {
      gathered.resize(static_cast<size_t>(shape[0]));
      return static_cast<void*>(gathered.data());
    });
    if (!s.ok() || gathered != std::vector<float>{0, 1, 1, 2, 2, 2}) {
      return "allgather: " + s.ToString() + " " + Text(gathered);
    }
    // broadcast from job rank 2 (a job rank, as in Horovod; set rank 1), in place and out of
    // place.
    std::vector<float> weights(4, static_cast<float>(rt.rank()));
    s = rt.Broadcast("weights", View(weights), 2);
    if (!s.ok() || weights != std::vector<float>(4, 2.0f)) {
      return "broadcast: " + s.ToString() + " " + Text(weights);
    }
    std::vector<float> source(3, static_cast<float>(rt.rank())), copy(3, -1.0f);
    s = rt.Broadcast("copy", View(source), View(copy), 3);
    if (!s.ok() || copy != std::vector<float>(3, 3.0f)) {
      return "out-of-place broadcast: " + s.ToString() + " " + Text(copy);
    }
    // A root outside the set fails at enqueue, naming it and the set.
    Status bad = rt.Broadcast("bad root", View(weights), 1);
    if (bad.code() != StatusCode::kInvalidArgument ||
        bad.message().find("root rank 1 is not in process set 1 (ranks [0, 2, 3])") ==
            std::string::npos) {
      return "broadcast from job rank 1: " + bad.ToString();
    }
    // alltoall: one row to each set rank, valued 10 * sender + receiver.
    std::vector<float> send(3);
    for (int d = 0; d < 3; ++d) send[static_cast<size_t>(d)] = static_cast<float>(10 * me + d);
    std::vector<float> received;
    std::vector<int64_t> received_splits;
    s = rt.Alltoall(
        "a2a", View(send), {},
        [&](const std::vector<int64_t>& shape) {
          received.resize(static_cast<size_t>(shape[0]));
          return static_cast<void*>(received.data());
        },
        &received_splits);
    const std::vector<float> want_a2a = {static_cast<float>(me), static_cast<float>(10 + me),
                                         static_cast<float>(20 + me)};
    if (!s.ok() || received != want_a2a || received_splits != std::vector<int64_t>{1, 1, 1}) {
      return "alltoall: " + s.ToString() + " " + Text(received);
    }
    // reducescatter of 6 rows: each set rank gets 2 rows of the sum 1 + 3 + 4.
    std::vector<float> input(6, static_cast<float>(rt.rank() + 1));
    std::vector<float> part(2);
    s = rt.Reducescatter("rs", View(input), View(part));
    if (!s.ok() || part != std::vector<float>(2, 8.0f)) {
      return "reducescatter: " + s.ToString() + " " + Text(part);
    }
    // grouped allreduce.
    std::vector<float> g1(3, 1.0f), g2(2, 2.0f);
    s = rt.GroupedAllreduce({"g1", "g2"}, {View(g1), View(g2)}, {View(g1), View(g2)});
    if (!s.ok() || g1[2] != 3.0f || g2[1] != 6.0f) return "grouped: " + s.ToString();
    // barrier and join within the set.
    s = rt.Barrier();
    if (!s.ok()) return "set barrier: " + s.ToString();
    StatusOr<int> last = rt.Join();  // a job rank of the set
    if (!last.ok() || (*last != 0 && *last != 2 && *last != 3)) {
      return "set join: " + last.status().ToString();
    }
    ProcessSetScope global(0);
    return rt.Barrier().ok() ? "" : "global barrier";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("A join within a set gives zeros to the set's allreduces only",
          "[runtime][process_sets][join]") {
  Watchdog watchdog("join in a process set", std::chrono::seconds(60));
  LocalJob job(3);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int set = -1;
    std::string failed = Add(rt, {1, 2}, &set);
    if (!failed.empty()) return failed;
    std::vector<float> g(2, static_cast<float>(rt.rank() + 1));
    if (rt.rank() == 2) {
      std::optional<Handle> joined;
      int last = -1;
      {
        ProcessSetScope scope(set);
        StatusOr<Handle> h = rt.JoinAsync(&last);
        if (!h.ok()) return "join: " + h.status().ToString();
        joined = *h;
      }
      // Joined in the set only: the global allreduce still takes this rank's values.
      Status s = rt.Allreduce("global", View(g), View(g));
      if (!s.ok() || g[0] != 6.0f) return "global: " + s.ToString() + " " + Text(g);
      s = synchronize(*joined);
      // The last to join is job rank 1 (the set's rank 0).
      return s.ok() && last == 1 ? "" : "join: " + s.ToString() + " last " + std::to_string(last);
    }
    if (rt.rank() == 1) {
      ProcessSetScope scope(set);
      for (int step = 0; step < 2; ++step) {
        std::vector<float> x(3, 5.0f);
        Status s = rt.Allreduce("in set", View(x), View(x));
        if (!s.ok() || x[2] != 5.0f) return "in set: " + s.ToString() + " " + Text(x);
      }
    }
    Status s = rt.Allreduce("global", View(g), View(g));
    if (!s.ok() || g[0] != 6.0f) return "global: " + s.ToString() + " " + Text(g);
    if (rt.rank() == 1) {
      ProcessSetScope scope(set);
      StatusOr<int> last = rt.Join();
      if (!last.ok() || *last != 1) return "join: " + last.status().ToString();
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Process set errors: outsiders, unknown ids, disagreeing members, ops in flight",
          "[runtime][process_sets][errors]") {
  Watchdog watchdog("process set errors", std::chrono::seconds(90));
  LocalJob job(4);
  std::vector<std::string> disagree(4);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int set = -1;
    std::string failed = Add(rt, {0, 1, 2}, &set);
    if (!failed.empty()) return failed;
    std::vector<float> x(4, 1.0f);
    if (rt.rank() == 3) {
      // Not a member: an enqueue error here only, naming the set and the tensor.
      ProcessSetScope scope(set);
      Status s = rt.Allreduce("outsider", View(x), View(x));
      if (s.code() != StatusCode::kInvalidArgument ||
          s.message().find("allreduce 'outsider'") == std::string::npos ||
          s.message().find("rank 3 is not in process set 1") == std::string::npos) {
        return "outsider: " + s.ToString();
      }
    }
    {
      // An unknown id: an enqueue error.
      ProcessSetScope scope(42);
      Status s = rt.Allreduce("nowhere", View(x), View(x));
      if (s.code() != StatusCode::kInvalidArgument ||
          s.message().find("process set 42 is unknown") == std::string::npos ||
          s.message().find("'nowhere'") == std::string::npos) {
        return "unknown set: " + s.ToString();
      }
    }
    // Ranks that disagree on the members all fail.
    StatusOr<int> odd =
        rt.AddProcessSet(rt.rank() == 3 ? std::vector<int>{0, 2} : std::vector<int>{0, 1});
    disagree[static_cast<size_t>(rt.rank())] = odd.status().ToString();
    if (odd.ok() || odd.status().code() != StatusCode::kMismatch) return "disagreement accepted";
    // Removing a set while one of its ops is in flight (rank 0 submitted it, rank 1 and 2 not
    // yet) fails on every rank; once the op completed, the removal goes through.
    std::vector<float> late(2, static_cast<float>(rt.rank() + 1));
    std::optional<Handle> pending;
    if (rt.rank() == 0) {
      ProcessSetScope scope(set);
      StatusOr<Handle> h = rt.AllreduceAsync("late", View(late), View(late));
      if (!h.ok()) return "late: " + h.status().ToString();
      pending = *h;
    }
    Status removed = rt.RemoveProcessSet(set);
    if (removed.code() != StatusCode::kFailedPrecondition ||
        removed.message().find("'late [process set 1]'") == std::string::npos ||
        removed.message().find("in flight") == std::string::npos) {
      return "removal with an op in flight: " + removed.ToString();
    }
    if (rt.rank() == 1 || rt.rank() == 2) {
      ProcessSetScope scope(set);
      Status s = rt.Allreduce("late", View(late), View(late));
      if (!s.ok() || late[0] != 6.0f) return "late on " + s.ToString();
    }
    if (rt.rank() == 0) {
      Status s = synchronize(*pending);
      if (!s.ok() || late[0] != 6.0f) return "late: " + s.ToString();
    }
    removed = rt.RemoveProcessSet(set);
    if (!removed.ok()) return "removal: " + removed.ToString();
    if (rt.RemoveProcessSet(0).code() != StatusCode::kInvalidArgument) return "removed set 0";
    // The id is refused from now on; a new set gets a new id.
    if (rt.rank() != 3) {
      ProcessSetScope scope(set);
      Status s = rt.Allreduce("after removal", View(x), View(x));
      if (s.code() != StatusCode::kInvalidArgument ||
          s.message().find("process set 1 is unknown") == std::string::npos) {
        return "removed set: " + s.ToString();
      }
    }
    int again = -1;
    failed = Add(rt, {0, 1, 2}, &again);
    if (!failed.empty()) return failed;
    if (again == set) return "a removed id was reused";
    if (rt.rank() != 3) {
      ProcessSetScope scope(again);
      std::vector<float> y(2, 1.0f);
      Status s = rt.Allreduce("late", View(y), View(y));
      if (!s.ok() || y[0] != 3.0f) return "re-added set: " + s.ToString();
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
  for (const std::string& text : disagree) {
    INFO(text);
    CHECK(text.find("Ranks disagree on the members of a new process set") != std::string::npos);
    CHECK(text.find("rank 3 sent [0, 2]") != std::string::npos);
  }
}

TEST_CASE("Mismatches inside a set name the set and its members", "[runtime][process_sets]") {
  Watchdog watchdog("process set mismatch", std::chrono::seconds(60));
  LocalJob job(3);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int set = -1;
    std::string failed = Add(rt, {1, 2}, &set);
    if (!failed.empty() || rt.rank() == 0) return failed;
    ProcessSetScope scope(set);
    std::vector<float> x(static_cast<size_t>(rt.rank() + 1), 1.0f);
    Status s = rt.Allreduce("shape", View(x), View(x));
    if (s.code() != StatusCode::kMismatch ||
        s.message().find("'shape [process set 1]'") == std::string::npos ||
        s.message().find("whose members are ranks [1, 2]") == std::string::npos) {
      return s.ToString();
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("The timeline shows a set's op on its own track, named with the set",
          "[runtime][process_sets][timeline]") {
  Watchdog watchdog("process set timeline", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo-process-sets-");
  {
    LocalJob job(3);
    for (int r = 0; r < 3; ++r) REQUIRE(job.rank(r).StartTimeline(temp.path() + "/t.json").ok());
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      int set = -1;
      std::string failed = Add(rt, {0, 2}, &set);
      if (!failed.empty() || rt.rank() == 1) return failed;
      ProcessSetScope scope(set);
      std::vector<float> x(4, 1.0f);
      Status s = rt.Allreduce("traced", View(x), View(x));
      return s.ok() && x[0] == 2.0f ? "" : s.ToString();
    });
    CHECK(failures == std::vector<std::string>{});
    for (int r = 0; r < 3; ++r) REQUIRE(job.rank(r).StopTimeline().ok());
  }
  auto text_of = [](const std::string& file) {
    std::ifstream in(file);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  CHECK(text_of(temp.path() + "/t.rank2.json").find("traced [process set 1]") != std::string::npos);
  CHECK(text_of(temp.path() + "/t.rank1.json").find("traced") == std::string::npos);
}

TEST_CASE("KOLO_PROCESS_SETS makes static sets at init", "[runtime][process_sets][config]") {
  Watchdog watchdog("static process sets", std::chrono::seconds(60));
  LocalJob job(4, [](Options& options) { options.process_sets = "0,1; 2,3"; });
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    if (rt.ProcessSetRanks(1) != std::vector<int>{0, 1} ||
        rt.ProcessSetRanks(2) != std::vector<int>{2, 3}) {
      return "static sets missing";
    }
    ProcessSetScope scope(rt.rank() < 2 ? 1 : 2);
    std::vector<float> x(8, static_cast<float>(rt.rank()));
    Status s = rt.Allreduce("static", View(x), View(x));
    const float want = rt.rank() < 2 ? 1.0f : 5.0f;
    if (!s.ok() || x[7] != want) return "static allreduce: " + s.ToString() + " " + Text(x);
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("Ranks whose KOLO_PROCESS_SETS differ all fail init, naming both values",
          "[runtime][process_sets][config]") {
  Watchdog watchdog("static process sets that differ", std::chrono::seconds(60));
  const int port = kolo::testing::PickFreePort();
  REQUIRE(port > 0);
  std::vector<Status> created = kolo::testing::RunOnRanks(3, [&](int r) -> Status {
    Options options;
    options.rank = r;
    options.size = 3;
    options.controller_address = "127.0.0.1:" + std::to_string(port);
    options.secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    options.job_id = "static-sets";
    options.timeout_seconds = 10;
    options.start_timeout_seconds = 20;
    // Rank 2 lacks the second set: the first set agrees, the lists do not.
    options.process_sets = r == 2 ? "0,1" : "0,1;1,2";
    StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(options);
    return rt.status();
  });
  for (const Status& status : created) {
    INFO(status.ToString());
    CHECK(status.code() == StatusCode::kMismatch);
    CHECK(status.message().find("KOLO_PROCESS_SETS") != std::string::npos);
    CHECK(status.message().find("rank 2 has \"0,1\"") != std::string::npos);
  }
}

TEST_CASE("KOLO_PROCESS_SETS is checked when read", "[process_sets][config]") {
  auto parse = [](const std::string& sets) {
    return Options::FromMap({{"KOLO_RANK", "0"},
                             {"KOLO_SIZE", "4"},
                             {"KOLO_CONTROLLER", "127.0.0.1:1"},
                             {"KOLO_PROCESS_SETS", sets}});
  };
  StatusOr<Options> good = parse("0,1;2,3;");
  REQUIRE(good.ok());
  CHECK(good->process_sets == "0,1;2,3;");
  for (const std::string bad : {"0,x", "0,,1", "0,4", "1,1"}) {
    StatusOr<Options> parsed = parse(bad);
    INFO(bad);
    CHECK_FALSE(parsed.ok());
    CHECK(parsed.status().message().find("KOLO_PROCESS_SETS") != std::string::npos);
  }
}
