// The timeline of a real 3-rank job, read back with kolo-timeline's own loader: every rank's
// file is valid, negotiations (cached ones too) and op spans with their phases are there, and
// a mismatch shows as a failed op.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>

#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"
#include "tools/timeline/summary.h"
#include "tools/timeline/trace_model.h"
#include "tools/timeline/trace_set.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

// Two allreduces of "w" (the second announced by cache id), three async tensors enqueued
// together, and a shape mismatch.
std::string RunSteps(Runtime& rt) {
  std::vector<float> w(100, 1.0f);
  TensorView wv{w.data(), DataType::kFloat32, {100}, Device::Cpu()};
  for (int i = 0; i < 2; ++i) {
    Status s = rt.Allreduce("w", wv, wv);
    if (!s.ok()) return s.ToString();
  }
  std::vector<std::vector<float>> g(3, std::vector<float>(10, 1.0f));
  std::vector<std::promise<Status>> done(3);
  for (int t = 0; t < 3; ++t) {
    TensorView view{g[t].data(), DataType::kFloat32, {10}, Device::Cpu()};
    Status s = rt.AllreduceAsync("g/" + std::to_string(t), view, view, {},
                                 [&done, t](const Status& st) { done[t].set_value(st); });
    if (!s.ok()) return s.ToString();
  }
  for (auto& d : done) {
    Status s = d.get_future().get();
    if (!s.ok()) return s.ToString();
  }
  float bad[6] = {0};
  TensorView bv{
      bad, DataType::kFloat32, {rt.rank() == 1 ? 3 : 2, rt.rank() == 1 ? 2 : 3}, Device::Cpu()};
  Status s = rt.Allreduce("bad", bv, bv);
  return s.code() == StatusCode::kMismatch ? "" : "expected a mismatch, got " + s.ToString();
}

}  // namespace

TEST_CASE("Every rank writes a valid timeline that kolo-timeline reads back",
          "[runtime][timeline]") {
  Watchdog watchdog("timeline of a 3-rank job", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo-timeline-test-");
  const std::string& dir = temp.path();
  const std::string path = dir + "/trace.json";
  {
    LocalJob job(3, [&](Options& o) {
      o.timeline_path = path;
      o.timeline_mark_cycles = true;
    });
    CHECK(job.RunOnAllRanks(RunSteps) == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  std::vector<std::string> files;
  for (int r = 0; r < 3; ++r) files.push_back(dir + "/trace.rank" + std::to_string(r) + ".json");
  for (const std::string& file : files) {  // each rank measured its clock against rank 0's
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("\"kolo_clock\"") != std::string::npos);
    CHECK(text.find("\"rtt_us\":") != std::string::npos);
  }
  auto set = timeline::LoadTraceSet(files);
  REQUIRE(set.ok());
  CHECK(set->warnings.empty());
  timeline::TraceModel model = timeline::BuildTraceModel(*set);
  CHECK(model.warnings == std::vector<std::string>{});
  REQUIRE(model.ranks.size() == 3);

  std::map<std::string, int> negotiations;
  for (const auto& n : model.negotiations) {
    ++negotiations[n.tensor];
    CHECK(n.op == "ALLREDUCE");
    CHECK(n.last_rank >= 0);
    CHECK(n.last_rank < 3);
  }
  CHECK(negotiations["w"] == 2);  // the cached second announcement is traced too
  CHECK(negotiations["g/0"] == 1);
  CHECK(negotiations["bad"] == 1);

  std::map<int, int> ok_ops, failed_ops;
  for (const auto& op : model.ops) ++(op.ok ? ok_ops : failed_ops)[op.rank];
  for (int r = 0; r < 3; ++r) {
    CHECK(ok_ops[r] == 5);
    CHECK(failed_ops[r] == 1);
  }
  timeline::Summary summary = timeline::Summarize(model);
  for (const auto& totals : summary.per_rank) {
    CHECK(totals.us(timeline::Phase::kTransfer) > 0);
    CHECK(totals.us(timeline::Phase::kQueue) > 0);
    CHECK(totals.us(timeline::Phase::kCallback) >= 0);
    CHECK(totals.bytes == 2 * 400 + 3 * 40);
  }
  // Responses are counted once across ranks: w, w, g/0..2 (fused or not) and bad.
  CHECK(summary.fusion.tensors == 6);
}

TEST_CASE(
    "A timeline started and stopped at run time covers only what ran in between; "
    "start_timeline(path, mark_cycles) as Horovod's",
    "[runtime][timeline]") {
  Watchdog watchdog("run-time timeline", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo-timeline-test-");
  const std::string& dir = temp.path();
  {
    LocalJob job(2);
    auto step = [](const std::string& name) {
      return [name](Runtime& rt) -> std::string {
        float x[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        TensorView view{x, DataType::kFloat32, {8}, Device::Cpu()};
        Status s = rt.Allreduce(name, view, view);
        return s.ok() ? "" : s.ToString();
      };
    };
    CHECK(job.RunOnAllRanks(step("before")) == std::vector<std::string>{});
    for (int r = 0; r < 2; ++r) {
      REQUIRE(job.rank(r).StartTimeline(dir + "/rt.json", /*mark_cycles=*/true).ok());
    }
    // As Horovod's test does: starting it again with the same path goes on in the same file.
    CHECK(job.rank(0).StartTimeline(dir + "/rt.json", true).ok());
    CHECK(job.rank(1).StartTimeline(dir + "/rt.json").ok());
    const Status other = job.rank(0).StartTimeline(dir + "/again.json");
    CHECK(other.code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(other.message(), Catch::Contains("again.json") && Catch::Contains("/rt.json"));
    CHECK(job.RunOnAllRanks(step("during")) == std::vector<std::string>{});
    for (int r = 0; r < 2; ++r) REQUIRE(job.rank(r).StopTimeline().ok());
    CHECK(job.RunOnAllRanks(step("after")) == std::vector<std::string>{});
    // Without mark_cycles: no CYCLE marks.
    for (int r = 0; r < 2; ++r) REQUIRE(job.rank(r).StartTimeline(dir + "/quiet.json", false).ok());
    CHECK(job.RunOnAllRanks(step("quiet")) == std::vector<std::string>{});
    for (int r = 0; r < 2; ++r) REQUIRE(job.rank(r).StopTimeline().ok());
  }
  auto text_of = [](const std::string& file) {
    std::ifstream in(file);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  CHECK(text_of(dir + "/rt.rank0.json").find("\"CYCLE\"") != std::string::npos);
  CHECK(text_of(dir + "/quiet.rank0.json").find("\"CYCLE\"") == std::string::npos);
  CHECK(text_of(dir + "/quiet.rank0.json").find("\"quiet\"") != std::string::npos);
  auto set = timeline::LoadTraceSet({dir + "/rt.rank0.json", dir + "/rt.rank1.json"});
  REQUIRE(set.ok());
  timeline::TraceModel model = timeline::BuildTraceModel(*set);
  CHECK(model.warnings == std::vector<std::string>{});
  REQUIRE(model.ops.size() == 2);
  for (const auto& op : model.ops) CHECK(op.tensor == "during");
  REQUIRE(model.negotiations.size() == 1);
  CHECK(model.negotiations[0].tensor == "during");
}

TEST_CASE("A name enqueued again before its span ended keeps every track nested",
          "[runtime][timeline]") {
  Watchdog watchdog("re-enqueued names in the timeline", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo-timeline-test-");
  const std::string& dir = temp.path();
  constexpr int kSteps = 20;
  {
    LocalJob job(2, [&](Options& o) { o.timeline_path = dir + "/re.json"; });
    auto failures = job.RunOnAllRanks([](Runtime& rt) -> std::string {
      float x[4] = {1, 1, 1, 1};
      TensorView view{x, DataType::kFloat32, {4}, Device::Cpu()};
      for (int i = 0; i < kSteps; ++i) {  // the next call races the previous span's end
        Status s = rt.Allreduce("w", view, view);
        if (!s.ok()) return s.ToString();
      }
      std::promise<Status> done;  // each callback enqueues the same name again
      std::function<void(int, const Status&)> step = [&](int i, const Status& s) {
        if (!s.ok() || i == kSteps) {
          done.set_value(s);
          return;
        }
        Status enq = rt.AllreduceAsync("chain", view, view, {},
                                       [&, i](const Status& st) { step(i + 1, st); });
        if (!enq.ok()) done.set_value(enq);
      };
      step(0, Status::Ok());
      Status s = done.get_future().get();
      return s.ok() ? "" : s.ToString();
    });
    CHECK(failures == std::vector<std::string>{});
  }
  auto set = timeline::LoadTraceSet({dir + "/re.rank0.json", dir + "/re.rank1.json"});
  REQUIRE(set.ok());
  timeline::TraceModel model = timeline::BuildTraceModel(*set);
  CHECK(model.warnings == std::vector<std::string>{});
  std::map<std::string, int> ops;
  for (const auto& op : model.ops) {
    CHECK(op.ok);
    CHECK(op.end_us >= op.begin_us);
    ++ops[op.tensor];
  }
  CHECK(ops["w"] == 2 * kSteps);
  CHECK(ops["chain"] == 2 * kSteps);
  CHECK(ops.size() == 2);  // "chain #2" tracks still count as the tensor "chain"
}

TEST_CASE("Ops the fast path ran count as one response each in the fusion summary",
          "[runtime][timeline][fastpath]") {
  Watchdog watchdog("fast-path fusion summary", std::chrono::seconds(60));
  const kolo::testing::TempDir temp("kolo-timeline-test-");
  const std::string& dir = temp.path();
  const std::string path = dir + "/trace.json";
  {
    LocalJob job(2, [&](Options& o) { o.timeline_path = path; });
    CHECK(job.RunOnAllRanks([](Runtime& rt) -> std::string {
      float v[4] = {1, 2, 3, 4};
      TensorView view{v, DataType::kFloat32, {4}, Device::Cpu()};
      for (int i = 0; i < 4; ++i) {  // the first through the controller, then the fast path
        Status s = rt.Allreduce("v", view, view);
        if (!s.ok()) return s.ToString();
      }
      return "";
    }) == std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  auto set = timeline::LoadTraceSet({dir + "/trace.rank0.json", dir + "/trace.rank1.json"});
  REQUIRE(set.ok());
  timeline::TraceModel model = timeline::BuildTraceModel(*set);
  timeline::Summary summary = timeline::Summarize(model);
  CHECK(summary.fusion.groups == 4);
  CHECK(summary.fusion.tensors == 4);
  std::map<std::string, int> negotiations;
  for (const auto& n : model.negotiations) ++negotiations[n.tensor];
  CHECK(negotiations["v"] == 4);  // rank 0 draws the fast path's negotiations too
}

namespace {

// Three steps of a training loop's shape: 100 ms of "forward" work, then a "backward" pass
// that hands three gradients over. As hooks fire (`as_hooks_fire`), each is handed over when
// "produced" and the next one is produced only after it completed, so the first two always
// finish before the last hand-over, however slow the machine; otherwise all three are handed
// over together at the end of the pass. Then a wait for the three. No step races a deadline:
// the 100 ms only has to be long against the gaps inside a step, which are microseconds.
std::string TrainLikeSteps(Runtime& rt, bool as_hooks_fire) {
  std::vector<std::vector<float>> grads(3, std::vector<float>(16384, 1.0f));
  for (int step = 0; step < 3; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::vector<std::promise<Status>> done(3);
    std::vector<std::future<Status>> results;
    for (auto& d : done) results.push_back(d.get_future());
    auto enqueue = [&](int g) {
      TensorView view{grads[g].data(), DataType::kFloat32, {16384}, Device::Cpu()};
      return rt.AllreduceAsync("grad/" + std::to_string(g), view, view, {},
                               [&done, g](const Status& st) { done[g].set_value(st); });
    };
    for (int g = 0; g < 3; ++g) {
      if (!enqueue(g).ok()) return "enqueue failed";
      if (as_hooks_fire) results[g].wait();
    }
    for (auto& result : results) {
      Status s = result.get();
      if (!s.ok()) return s.ToString();
    }
  }
  return "";
}

struct TrainLikeRun {
  timeline::TraceModel model;
  timeline::Summary summary;
};

TrainLikeRun RunTrainLike(bool as_hooks_fire) {
  const kolo::testing::TempDir temp("kolo-timeline-test-");
  const std::string path = temp.path() + "/trace.json";
  {
    LocalJob job(2, [&](Options& o) { o.timeline_path = path; });
    CHECK(job.RunOnAllRanks([&](Runtime& rt) { return TrainLikeSteps(rt, as_hooks_fire); }) ==
          std::vector<std::string>{});
    for (const Status& s : job.ShutdownAll()) CHECK(s.ok());
  }
  auto set = timeline::LoadTraceSet(
      {temp.path() + "/trace.rank0.json", temp.path() + "/trace.rank1.json"});
  REQUIRE(set.ok());
  TrainLikeRun run{timeline::BuildTraceModel(*set), {}};
  run.summary = timeline::Summarize(run.model);
  return run;
}

// Wall time of `rank`'s copies and transfers inside its op spans of the tensors `names`.
double MovementOf(const timeline::TraceModel& model, int rank,
                  const std::vector<std::string>& names) {
  double total = 0;
  for (const timeline::PhaseSpan& phase : model.phases) {
    if (phase.rank != rank ||
        (phase.phase != timeline::Phase::kCopyIn && phase.phase != timeline::Phase::kTransfer &&
         phase.phase != timeline::Phase::kCopyOut)) {
      continue;
    }
    for (const timeline::OpSpan& op : model.ops) {
      if (op.rank == rank && op.begin_us <= phase.begin_us && phase.end_us <= op.end_us &&
          std::find(names.begin(), names.end(), op.tensor) != names.end()) {
        total += phase.end_us - phase.begin_us;
        break;
      }
    }
  }
  return total;
}

// One rank's overlap figures, for a failing check's message.
std::string Describe(const timeline::OverlapStats& stats) {
  std::ostringstream text;
  text << "rank " << stats.rank << ": movement " << stats.movement_us
       << " us, before the last enqueue " << stats.overlapped_us << " us, tail " << stats.tail_us
       << " us";
  return text.str();
}

}  // namespace

TEST_CASE("The summary shows gradients handed over as hooks fire overlapping the backward pass",
          "[runtime][timeline]") {
  Watchdog watchdog("overlap in a real trace", std::chrono::seconds(60));
  const TrainLikeRun hooks = RunTrainLike(true);
  REQUIRE(hooks.summary.overlap.size() == 2);
  for (const timeline::OverlapStats& stats : hooks.summary.overlap) {
    INFO(Describe(stats));
    CHECK(stats.steps == 3);
    CHECK(stats.movement_us ==
          Approx(MovementOf(hooks.model, stats.rank, {"grad/0", "grad/1", "grad/2"})));
    // Exactly the first two gradients' movement ran before the last hand-over: each finished
    // before the next was handed over, and the last one's began after it. (How large a share
    // that is depends on the machine: a transfer that waits for a descheduled peer is long.)
    CHECK(stats.overlapped_us > 0);
    CHECK(stats.overlapped_us == Approx(MovementOf(hooks.model, stats.rank, {"grad/0", "grad/1"})));
  }
  const TrainLikeRun after = RunTrainLike(false);
  REQUIRE(after.summary.overlap.size() == 2);
  for (const timeline::OverlapStats& stats : after.summary.overlap) {
    INFO(Describe(stats));
    CHECK(stats.steps == 3);
    // Handed over together after the pass: little runs before the last enqueue, against about
    // two thirds as hooks fire. Not nothing: a caller descheduled between its three enqueues
    // (a loaded machine: 0.32 seen at load 12 on 2 cores) lets the first gradients move.
    CHECK(stats.overlapped_share() < 0.5);
    CHECK(stats.tail_per_step_us() > 0);
  }
}
