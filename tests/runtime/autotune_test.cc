// KOLO_AUTOTUNE through the public API, over real gRPC and loopback sockets: rank 0 tunes the
// fusion threshold while two ranks train (steps of several allreduces each, enough bytes that
// the thresholds tried cut them into different transfers), every result stays exact on every
// rank whatever setting is in force (ranks that cut a step differently would exchange
// mismatched transfers), and the tuner's log shows the settings it scored.
#include <catch2/catch.hpp>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <vector>

#include "tests/support/local_job.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

constexpr int kTensors = 6;
constexpr int64_t kElements = 96 * 1024;  // 384 KiB of float32 each: 2.25 MiB a step

// One training step on `rt`: kTensors allreduces at once, each checked element by element.
std::string Step(Runtime& rt, int step) {
  std::vector<std::vector<float>> tensors(kTensors, std::vector<float>(kElements));
  std::vector<std::promise<Status>> done(kTensors);
  for (int t = 0; t < kTensors; ++t) {
    for (int64_t i = 0; i < kElements; ++i) {
      tensors[t][i] = static_cast<float>((rt.rank() + 1) * (t + 1) + (i + step) % 7);
    }
    TensorView view{tensors[t].data(), DataType::kFloat32, {kElements}, Device::Cpu()};
    Status st = rt.AllreduceAsync("grad/" + std::to_string(t), view, view, AllreduceOptions{},
                                  [&done, t](const Status& s) { done[t].set_value(s); });
    if (!st.ok()) return "enqueue grad/" + std::to_string(t) + ": " + st.ToString();
  }
  for (int t = 0; t < kTensors; ++t) {
    Status st = done[t].get_future().get();
    if (!st.ok()) return "grad/" + std::to_string(t) + ": " + st.ToString();
    for (int64_t i = 0; i < kElements; ++i) {
      // Ranks 0 and 1: (1 + 2) * (t + 1) + 2 * ((i + step) % 7).
      const float want = static_cast<float>(3 * (t + 1) + 2 * ((i + step) % 7));
      if (tensors[t][i] != want) {
        return "step " + std::to_string(step) + ", grad/" + std::to_string(t) + "[" +
               std::to_string(i) + "] = " + std::to_string(tensors[t][i]) + ", want " +
               std::to_string(want);
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("With KOLO_AUTOTUNE rank 0 tunes the fusion threshold and every result stays exact",
          "[runtime][autotune]") {
  Watchdog watchdog("autotune_test", std::chrono::seconds(120));
  kolo::testing::TempDir dir;
  const std::string log = dir.File("autotune.csv");
  LocalJob job(2, [&log](Options& options) {
    options.autotune = true;
    options.autotune_log = log;
    options.autotune_warmup_samples = 1;
    options.autotune_steps_per_sample = 2;
    options.autotune_samples = 1;
    options.fusion_threshold_bytes = 1 << 20;  // the climb starts here: 1 MiB cuts a step in 3
  });
  const std::vector<std::string> failures = job.RunOnAllRanks([](Runtime& rt) -> std::string {
    for (int step = 0; step < 120; ++step) {
      std::string failure = Step(rt, step);
      if (!failure.empty()) return failure;
    }
    return "";
  });
  for (const std::string& failure : failures) FAIL_CHECK(failure);

  std::ifstream in(log);
  REQUIRE(in.good());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() >= 4);  // the header, then the start and both of its neighbours at least
  CHECK(lines[0] ==
        "fusion_threshold_bytes,cycle_time_ms,hierarchical_min_bytes,score_bytes_per_second");
  std::set<std::string> thresholds;
  for (size_t i = 1; i < lines.size(); ++i) {
    INFO(lines[i]);
    thresholds.insert(lines[i].substr(0, lines[i].find(',')));
  }
  CHECK(lines[1].rfind(std::to_string(1 << 20) + ",", 0) == 0);
  CHECK(thresholds.count(std::to_string(2 << 20)) == 1);  // up from the start
  CHECK(thresholds.size() >= 2);
  for (const Status& status : job.ShutdownAll()) CHECK(status.ok());
}
