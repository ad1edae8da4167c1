// KOLO_AUTOTUNE tuning the hierarchical choice, through the public API: four runtimes in one
// process (real gRPC, real loopback mesh and shared memory) posing as two hosts of two ranks by
// their host names, KOLO_HIERARCHICAL=auto, rank 0 tuning while every rank trains. Each step
// allreduces tensors of three dtypes (never fused together) whose sizes straddle the rules the
// climb tries, so the same tensor runs hierarchically under one rule and flat under the next.
// Checked: every result exact on every rank, and for every op the path each rank ran (its
// timeline's HIERARCHICAL_ALLREDUCE or RING_ALLREDUCE) the same on every rank; ranks that chose
// differently would exchange mismatched transfers, or wait for each other until the timeout.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"
#include "tools/timeline/trace_reader.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

constexpr int kRanks = 4;

struct Tensor {
  const char* name;
  DataType dtype;
  int64_t count;
};
// 96 KiB: hierarchical under auto's 64 KiB and under always, flat under flat (the rule's two
// ends, which the tuner scores first); 16 KiB: flat under 64 KiB, hierarchical under always;
// 512 KiB: hierarchical but under flat.
const Tensor kStepTensors[] = {
    {"grad/mid", DataType::kFloat32, 24 << 10},
    {"grad/small", DataType::kInt32, 4 << 10},
    {"grad/large", DataType::kFloat64, 64 << 10},
};

// One training step on `rt`: every tensor allreduced at once, each checked element by element.
std::string Step(Runtime& rt) {
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::promise<Status>> done(std::size(kStepTensors));
  for (const Tensor& t : kStepTensors) {
    data.push_back(kolo::testing::MakeInput(t.dtype, t.count, rt.rank(), ReduceOp::kSum));
  }
  for (size_t i = 0; i < std::size(kStepTensors); ++i) {
    const Tensor& t = kStepTensors[i];
    TensorView view = kolo::testing::View(data[i], t.dtype, t.count);
    Status st = rt.AllreduceAsync(t.name, view, view, AllreduceOptions{},
                                  [&done, i](const Status& s) { done[i].set_value(s); });
    if (!st.ok()) {
      for (size_t j = i; j < std::size(kStepTensors); ++j) done[j].set_value(st);
    }
  }
  std::string failure;
  for (size_t i = 0; i < std::size(kStepTensors); ++i) {
    const Tensor& t = kStepTensors[i];
    Status st = done[i].get_future().get();
    if (!st.ok()) {
      if (failure.empty()) failure = std::string(t.name) + ": " + st.ToString();
      continue;
    }
    for (int64_t e = 0; e < t.count && failure.empty(); ++e) {
      const double want = kolo::testing::ExpectedAllreduce(kRanks, e, ReduceOp::kSum, t.dtype);
      const double got = kolo::testing::ReadElement(data[i], t.dtype, e);
      if (got != want) {
        failure = std::string(t.name) + "[" + std::to_string(e) + "] = " + std::to_string(got) +
                  ", want " + std::to_string(want);
      }
    }
  }
  return failure;
}

// Whether the tuner's log shows a line whose hierarchical rule is `rule` (as the CSV writes it).
bool Scored(const std::string& log, const std::string& rule) {
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find("," + rule + ",") != std::string::npos) return true;
  }
  return false;
}

// The transfer phases of `rank`'s timeline, by tensor name ("#2" tracks of a name re-enqueued
// before its span ended counted as the name), in the order they ran.
std::map<std::string, std::vector<std::string>> PathsOf(const std::string& path, int rank,
                                                        std::string* error) {
  std::map<std::string, std::vector<std::string>> paths;
  StatusOr<std::string> text = timeline::ReadFileText(path);
  if (!text.ok()) {
    *error = text.status().ToString();
    return paths;
  }
  std::map<int64_t, std::string> tracks;
  std::vector<std::string> warnings;
  Status read = timeline::ReadTraceArray(
      *text, path,
      [&](timeline::JsonValue object, int line) -> Status {
        KOLO_ASSIGN_OR_RETURN(timeline::Event event, timeline::ParseEvent(object, path, line));
        if (event.pid != rank) return Status::Ok();
        if (event.phase == 'M' && event.name == "thread_name") {
          std::string name = timeline::GetString(event.args, "name");
          tracks[event.tid] = name.substr(0, name.find(" #"));
        } else if (event.phase == 'X' &&
                   (event.name == "HIERARCHICAL_ALLREDUCE" || event.name == "RING_ALLREDUCE")) {
          paths[tracks[event.tid]].push_back(event.name);
        } else if (event.phase == 'M' && event.name == "kolo_trace_end") {
          int64_t dropped = 0;
          if (timeline::GetInt(event.args, "dropped_events", &dropped) && dropped > 0) {
            return Internal(std::to_string(dropped) + " events dropped");
          }
        }
        return Status::Ok();
      },
      &warnings);
  if (!read.ok()) *error = read.ToString();
  return paths;
}

}  // namespace

TEST_CASE(
    "With KOLO_AUTOTUNE rank 0 tunes the hierarchical choice and every rank runs each op the "
    "same way",
    "[runtime][autotune][hierarchical]") {
  Watchdog watchdog("autotune hierarchical", std::chrono::seconds(150));
  kolo::testing::TempDir dir;
  const std::string log = dir.File("autotune.csv");
  const std::string trace = dir.File("t.json");
  int steps_run = 0;
  {
    LocalJob job(kRanks, [&](Options& options) {
      options.host = options.rank < 2 ? "host-a" : "host-b";
      options.hierarchical = Hierarchical::kAuto;
      options.timeline_path = trace;
      options.autotune = true;
      options.autotune_log = log;
      options.autotune_warmup_samples = 1;
      options.autotune_steps_per_sample = 2;
      options.autotune_samples = 1;
      // At the grid's top the threshold has one neighbour to score: the climb reaches the
      // hierarchical rule sooner.
      options.fusion_threshold_bytes = int64_t{1} << 30;
    });
    const std::vector<std::string> failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      // Until rank 0's log shows the rule's two ends scored (flat, then always: "0"), then a
      // few steps under whatever follows; every rank learns when to stop from an allreduce of
      // rank 0's word, itself an op of the job.
      for (int step = 0, after = -1; step < 400; ++step) {
        std::string failure = Step(rt);
        if (!failure.empty()) return "step " + std::to_string(step) + ": " + failure;
        int32_t stop = rt.rank() == 0 && after < 0 && Scored(log, "0") ? 1 : 0;
        Status s = rt.Allreduce("stop", {&stop, DataType::kInt32, {1}, Device::Cpu()},
                                {&stop, DataType::kInt32, {1}, Device::Cpu()});
        if (!s.ok()) return "stop: " + s.ToString();
        if (stop > 0) after = step;
        if (after >= 0 && step >= after + 4) {
          if (rt.rank() == 0) steps_run = step + 1;
          return "";
        }
      }
      return "the tuner did not score the hierarchical rule's ends within 400 steps";
    });
    for (const std::string& failure : failures) CHECK(failure == "");
    for (const Status& status : job.ShutdownAll()) CHECK(status.ok());
  }
  INFO("steps: " << steps_run);
  std::ifstream in(log);
  std::string header;
  REQUIRE(std::getline(in, header));
  CHECK(header ==
        "fusion_threshold_bytes,cycle_time_ms,hierarchical_min_bytes,score_bytes_per_second");
  CHECK(Scored(log, "65536"));  // the start: auto's rule
  CHECK(Scored(log, "flat"));   // the first end

  std::string error;
  const std::map<std::string, std::vector<std::string>> first =
      PathsOf(dir.File("t.rank0.json"), 0, &error);
  REQUIRE(error == "");
  const std::vector<std::string>& mid = first.at("grad/mid");
  CHECK(mid.size() == static_cast<size_t>(steps_run));
  // Both paths ran: 96 KiB went hierarchically under 64 KiB and always, flat under flat.
  CHECK(std::count(mid.begin(), mid.end(), "HIERARCHICAL_ALLREDUCE") > 0);
  CHECK(std::count(mid.begin(), mid.end(), "RING_ALLREDUCE") > 0);
  for (int r = 1; r < kRanks; ++r) {
    INFO("rank " << r);
    const std::map<std::string, std::vector<std::string>> paths =
        PathsOf(dir.File("t.rank" + std::to_string(r) + ".json"), r, &error);
    REQUIRE(error == "");
    CHECK(paths == first);
  }
}

TEST_CASE("With KOLO_HIERARCHICAL=on the autotuner leaves the hierarchical choice alone",
          "[runtime][autotune][hierarchical]") {
  Watchdog watchdog("autotune hierarchical on", std::chrono::seconds(60));
  kolo::testing::TempDir dir;
  const std::string log = dir.File("autotune.csv");
  LocalJob job(kRanks, [&](Options& options) {
    options.host = options.rank % 2 == 0 ? "host-a" : "host-b";
    options.hierarchical = Hierarchical::kOn;
    options.autotune = true;
    options.autotune_log = log;
    options.autotune_warmup_samples = 0;
    options.autotune_steps_per_sample = 1;
    options.autotune_samples = 1;
  });
  const std::vector<std::string> failures = job.RunOnAllRanks([](Runtime& rt) -> std::string {
    for (int step = 0; step < 6; ++step) {
      std::string failure = Step(rt);
      if (!failure.empty()) return "step " + std::to_string(step) + ": " + failure;
    }
    return "";
  });
  for (const std::string& failure : failures) CHECK(failure == "");
  for (const Status& status : job.ShutdownAll()) CHECK(status.ok());
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() >= 2);
  for (size_t i = 1; i < lines.size(); ++i) {
    INFO(lines[i]);
    CHECK(lines[i].find(",,") != std::string::npos);  // no rule tuned
  }
}
