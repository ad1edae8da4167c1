// The autotuner's climb against a modelled training loop: each step allreduces the same
// tensors, and the step takes a time that depends on the setting in force, so the score the
// tuner measures (bytes per second over samples of steps) has a known best.
#include "core/autotuner.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/hierarchy_rule.h"
#include "tests/support/temp_dir.h"

using kolo::Autotuner;
using MonotonicClock = std::chrono::steady_clock;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kTensors = 4;
constexpr int64_t kTensorBytes = 4 * kMiB;

// Runs training steps against `tuner` until it is done (or `max_steps`); a step's time is
// `step_ms(threshold, cycle)`, spread over its tensors. Returns the steps it took.
int Train(Autotuner& tuner, const std::function<double(int64_t, double)>& step_ms,
          int max_steps = 100000) {
  MonotonicClock::time_point now{};
  int steps = 0;
  while (!tuner.done() && steps < max_steps) {
    const double ms = step_ms(tuner.fusion_threshold_bytes(), tuner.cycle_time_ms());
    for (int t = 0; t < kTensors; ++t) {
      now += std::chrono::duration_cast<MonotonicClock::duration>(
          std::chrono::duration<double, std::milli>(ms / kTensors));
      tuner.Observe({"grad/" + std::to_string(t)}, kTensorBytes, now);
    }
    ++steps;
  }
  return steps;
}

// Runs training steps of one allreduce per tensor of `tensor_bytes` against `tuner` until it is
// done, a step taking `step_ms(tuner)`; each step is reported to the tuner at its end, as one
// (tensors of different sizes reported one by one would make a sample's bytes depend on which
// tensor ends it). Returns the rules in force, in the order they came.
std::vector<uint64_t> TrainOps(Autotuner& tuner, const std::vector<int64_t>& tensor_bytes,
                               const std::function<double(const Autotuner&)>& step_ms) {
  std::vector<std::string> names;
  int64_t bytes = 0;
  for (size_t t = 0; t < tensor_bytes.size(); ++t) {
    names.push_back("grad/" + std::to_string(t));
    bytes += tensor_bytes[t];
  }
  std::vector<uint64_t> rules;
  MonotonicClock::time_point now{};
  for (int step = 0; !tuner.done() && step < 100000; ++step) {
    if (rules.empty() || rules.back() != tuner.hierarchy_min_bytes()) {
      rules.push_back(tuner.hierarchy_min_bytes());
    }
    now += std::chrono::duration_cast<MonotonicClock::duration>(
        std::chrono::duration<double, std::milli>(step_ms(tuner)));
    tuner.Observe(names, bytes, now);
  }
  if (rules.back() != tuner.hierarchy_min_bytes()) rules.push_back(tuner.hierarchy_min_bytes());
  return rules;
}

// A modelled allreduce of `bytes` between hosts, in ms: flat, a latency of `flat_ms` and
// 1 GB/s; hierarchical, `hierarchical_ms` (the two steps within the host added) and 2 GB/s (half
// the bytes cross the hosts' links). Which runs is the tuner's rule, as in ops/cpu_executor.cc.
double OpMs(const Autotuner& tuner, int64_t bytes, double flat_ms, double hierarchical_ms) {
  const bool hierarchical = static_cast<uint64_t>(bytes) >= tuner.hierarchy_min_bytes();
  return hierarchical ? hierarchical_ms + static_cast<double>(bytes) / 2e6
                      : flat_ms + static_cast<double>(bytes) / 1e6;
}

Autotuner::Config SmallConfig() {
  Autotuner::Config config;
  config.warmup_samples = 2;
  config.steps_per_sample = 5;
  config.samples_per_setting = 3;
  return config;
}

// Fastest at a 16 MiB threshold, 5 ms slower per doubling away from it; the cycle time does not
// matter.
double BestAt16MiB(int64_t threshold, double /*cycle_ms*/) {
  return 100 + 5 * std::abs(std::log2(static_cast<double>(threshold) / (16 * kMiB)));
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("the autotuner climbs down from the configured threshold to the best one") {
  kolo::testing::TempDir dir;
  Autotuner::Config config = SmallConfig();
  config.threshold_bytes = 64 * kMiB;
  config.log_path = dir.path() + "/autotune.csv";
  Autotuner tuner(config);
  CHECK(tuner.fusion_threshold_bytes() == 64 * kMiB);
  const int steps = Train(tuner, BestAt16MiB);
  REQUIRE(tuner.done());
  CHECK(tuner.fusion_threshold_bytes() == 16 * kMiB);
  CHECK(tuner.cycle_time_ms() == 1);  // flat: neither neighbour pays, the start stays
  // Scored: 64 (start), 128 (worse), 32, 16 (better), 8 (worse); cycle 2 and 0.5 ms (equal).
  const std::vector<std::string> lines = Lines(config.log_path);
  REQUIRE(lines.size() == 1 + 7);
  CHECK(lines[0] ==
        "fusion_threshold_bytes,cycle_time_ms,hierarchical_min_bytes,score_bytes_per_second");
  const int64_t expected[] = {64, 128, 32, 16, 8, 16, 16};
  for (int i = 0; i < 7; ++i) {
    INFO(lines[1 + i]);
    CHECK(lines[1 + i].rfind(std::to_string(expected[i] * kMiB) + ",", 0) == 0);
    CHECK(lines[1 + i].find(",,") != std::string::npos);  // the hierarchy is not tuned
  }
  CHECK_FALSE(tuner.tunes_hierarchy());
  // Two warm-up samples, three for the start, then one dropped and three scored per setting:
  // 29 samples. A sample ends when some tensor ran five times since it began, which spans four
  // to five steps depending on where the previous one ended.
  CHECK(steps >= 29 * 4);
  CHECK(steps <= 29 * 5);
}

TEST_CASE("the autotuner climbs up while doubling the threshold pays") {
  Autotuner::Config config = SmallConfig();
  config.threshold_bytes = 2 * kMiB;
  Autotuner tuner(config);
  Train(tuner, BestAt16MiB);
  REQUIRE(tuner.done());
  CHECK(tuner.fusion_threshold_bytes() == 16 * kMiB);
}

TEST_CASE("the autotuner tunes the cycle time after the threshold") {
  Autotuner::Config config = SmallConfig();
  config.cycle_ms = 1;
  Autotuner tuner(config);
  // Threshold flat; fastest at a 4 ms cycle.
  Train(tuner,
        [](int64_t, double cycle_ms) { return 100 + 10 * std::abs(std::log2(cycle_ms / 4)); });
  REQUIRE(tuner.done());
  CHECK(tuner.fusion_threshold_bytes() == 64 * kMiB);
  CHECK(tuner.cycle_time_ms() == 4);
}

TEST_CASE("the autotuner stays inside its grid and starts from a clamped value") {
  Autotuner::Config config = SmallConfig();
  config.threshold_bytes = int64_t{4} << 30;  // above the grid: starts at its top
  config.cycle_ms = 1000;
  Autotuner tuner(config);
  CHECK(tuner.fusion_threshold_bytes() == Autotuner::kMaxThreshold);
  CHECK(tuner.cycle_time_ms() == Autotuner::kMaxCycleMs);
  std::vector<int64_t> seen;
  Train(tuner, [&seen](int64_t threshold, double) {
    if (seen.empty() || seen.back() != threshold) seen.push_back(threshold);
    return 100.0;
  });
  REQUIRE(tuner.done());
  for (int64_t threshold : seen) {
    CHECK(threshold >= Autotuner::kMinThreshold);
    CHECK(threshold <= Autotuner::kMaxThreshold);
  }
  CHECK(tuner.fusion_threshold_bytes() == Autotuner::kMaxThreshold);
}

TEST_CASE("a better score within the minimum gain does not move the autotuner") {
  Autotuner::Config config = SmallConfig();
  config.threshold_bytes = 16 * kMiB;
  config.min_gain = 0.05;
  Autotuner tuner(config);
  // Doubling the threshold is 2% faster at every step: noise, by the rule.
  Train(tuner, [](int64_t threshold, double) {
    return 100 * std::pow(0.98, std::log2(static_cast<double>(threshold) / (16 * kMiB)));
  });
  REQUIRE(tuner.done());
  CHECK(tuner.fusion_threshold_bytes() == 16 * kMiB);
}

TEST_CASE("the autotuner ignores what runs after it is done") {
  Autotuner tuner(SmallConfig());
  Train(tuner, BestAt16MiB);
  REQUIRE(tuner.done());
  const int64_t threshold = tuner.fusion_threshold_bytes();
  Train(
      tuner, [](int64_t, double) { return 1.0; }, 1000);
  CHECK(tuner.fusion_threshold_bytes() == threshold);
}

TEST_CASE("an unwritable autotune log leaves the tuning on") {
  Autotuner::Config config = SmallConfig();
  config.log_path = "/nonexistent-dir/autotune.csv";
  Autotuner tuner(config);
  Train(tuner, BestAt16MiB);
  CHECK(tuner.done());
  CHECK(tuner.fusion_threshold_bytes() == 16 * kMiB);
}

// The step time of a loop with a tensor of each of `sizes`, allreduced between hosts as OpMs
// models, after `compute_ms` of compute.
double StepMs(const Autotuner& tuner, const std::vector<int64_t>& sizes, double compute_ms,
              double flat_ms, double hierarchical_ms) {
  double ms = compute_ms;
  for (int64_t bytes : sizes) ms += OpMs(tuner, bytes, flat_ms, hierarchical_ms);
  return ms;
}

// A tuner of the hierarchical rule too, from auto's 64 KiB, logging into a temporary directory.
struct HierarchyTuner {
  static Autotuner::Config Config(const std::string& log) {
    Autotuner::Config config = SmallConfig();
    config.threshold_bytes = Autotuner::kMaxThreshold;  // no neighbour above: a short first climb
    config.log_path = log;
    return config;
  }
  HierarchyTuner() { tuner.TuneHierarchy(64 << 10); }

  kolo::testing::TempDir dir;
  const std::string log = dir.path() + "/autotune.csv";
  Autotuner tuner{Config(log)};
};

TEST_CASE("the autotuner tunes the hierarchical rule after the cycle time, up to the best") {
  HierarchyTuner tuned;
  Autotuner& tuner = tuned.tuner;
  CHECK(tuner.tunes_hierarchy());
  CHECK(tuner.hierarchy_min_bytes() == 64 << 10);
  // Flat costs 0.02 ms, hierarchical 0.2 ms: the hierarchical path pays from 360 KB, so for
  // these tensors a rule of 128 KiB to 512 KiB is best, and 128 KiB is where the climb from
  // auto's 64 KiB finds it (256 KiB is no better).
  const std::vector<int64_t> sizes = {8 << 10, 64 << 10, 512 << 10, 4 << 20};
  const std::vector<uint64_t> rules = TrainOps(
      tuner, sizes, [&sizes](const Autotuner& t) { return StepMs(t, sizes, 0.5, 0.02, 0.2); });
  REQUIRE(tuner.done());
  CHECK(tuner.hierarchy_min_bytes() == 128 << 10);
  CHECK(tuner.fusion_threshold_bytes() == Autotuner::kMaxThreshold);
  CHECK(tuner.cycle_time_ms() == 1);
  // 64 KiB through the threshold's and the cycle time's climbs, then the rule's ends, flat and
  // always (neither better), then the climb from 64 KiB: 128 KiB (better), 256 KiB (no better),
  // and the best stays.
  CHECK(rules ==
        std::vector<uint64_t>{64 << 10, kolo::kHierarchyFlat, 0, 128 << 10, 256 << 10, 128 << 10});
  const std::vector<std::string> lines = Lines(tuned.log);
  // The header, the start, the threshold's neighbour, the cycle time's two, the rule's ends and
  // its two steps.
  REQUIRE(lines.size() == 1 + 8);
  for (size_t i = 1; i < 5; ++i) {
    INFO(lines[i]);
    CHECK(lines[i].find(",65536,") != std::string::npos);
  }
  CHECK(lines[5].find(",flat,") != std::string::npos);
  CHECK(lines[6].find(",0,") != std::string::npos);
  CHECK(lines[7].find(",131072,") != std::string::npos);
  CHECK(lines[8].find(",262144,") != std::string::npos);
}

TEST_CASE("the autotuner finds flat first when the hierarchical path never pays") {
  HierarchyTuner tuned;
  Autotuner& tuner = tuned.tuner;
  // A tensor at every point of the grid from 64 KiB to 64 MiB, the hierarchical path 200 ms
  // slower to start than flat: flat, the first end tried, wins by far; the climb from it (down
  // to 64 MiB) puts a tensor back on the hierarchical path and does not pay.
  std::vector<int64_t> sizes;
  for (int64_t bytes = 64 << 10; bytes <= 64 * kMiB; bytes *= 2) sizes.push_back(bytes);
  const std::vector<uint64_t> rules =
      TrainOps(tuner, sizes, [&sizes](const Autotuner& t) { return StepMs(t, sizes, 1, 0, 200); });
  REQUIRE(tuner.done());
  CHECK(tuner.hierarchy_min_bytes() == kolo::kHierarchyFlat);
  CHECK(rules == std::vector<uint64_t>{64 << 10, kolo::kHierarchyFlat, 0,
                                       Autotuner::kMaxHierarchyBytes, kolo::kHierarchyFlat});
  // The header, the start, the threshold's neighbour, the cycle time's two, then flat, always
  // and 64 MiB; flat, the best, is what stays (not scored again).
  const std::vector<std::string> lines = Lines(tuned.log);
  REQUIRE(lines.size() == 1 + 7);
  CHECK(lines[5].find(",flat,") != std::string::npos);
  CHECK(lines[7].find(",67108864,") != std::string::npos);
}

TEST_CASE("the autotuner finds always second when the hierarchical path always pays") {
  HierarchyTuner tuned;
  Autotuner& tuner = tuned.tuner;
  // A tensor at every point of the grid from 0 to 64 KiB, the hierarchical path 0.02 ms faster
  // to start than flat and twice as fast per byte: always, the second end tried, wins; the
  // climb from it (up to 4 KiB) takes the empty tensor off the hierarchical path and does not
  // pay.
  const std::vector<int64_t> sizes = {0, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10};
  const std::vector<uint64_t> rules = TrainOps(
      tuner, sizes, [&sizes](const Autotuner& t) { return StepMs(t, sizes, 0.1, 0.02, 0); });
  REQUIRE(tuner.done());
  CHECK(tuner.hierarchy_min_bytes() == 0);
  CHECK(rules == std::vector<uint64_t>{64 << 10, kolo::kHierarchyFlat, 0, 4 << 10, 0});
}

TEST_CASE("the autotuner starts the hierarchical rule on its grid") {
  Autotuner tuner(SmallConfig());
  tuner.TuneHierarchy(1);  // below the grid's lowest size: starts there
  CHECK(tuner.hierarchy_min_bytes() == Autotuner::kMinHierarchyBytes);
  Autotuner above(SmallConfig());
  above.TuneHierarchy(uint64_t{1} << 40);  // above its highest: starts there
  CHECK(above.hierarchy_min_bytes() == Autotuner::kMaxHierarchyBytes);
  Autotuner flat(SmallConfig());
  flat.TuneHierarchy(kolo::kHierarchyFlat);
  CHECK(flat.hierarchy_min_bytes() == kolo::kHierarchyFlat);
}
