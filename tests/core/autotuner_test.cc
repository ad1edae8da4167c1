// The autotuner's climb against a modelled training loop: each step allreduces the same
// tensors, and the step takes a time that depends on the setting in force, so the score the
// tuner measures (bytes per second over samples of steps) has a known best.
#include "core/autotuner.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include "tests/support/temp_dir.h"

using kolo::Autotuner;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kTensors = 4;
constexpr int64_t kTensorBytes = 4 * kMiB;

// Runs training steps against `tuner` until it is done (or `max_steps`); a step's time is
// `step_ms(threshold, cycle)`, spread over its tensors. Returns the steps it took.
int Train(Autotuner& tuner, const std::function<double(int64_t, double)>& step_ms,
          int max_steps = 100000) {
  Clock::time_point now{};
  int steps = 0;
  while (!tuner.done() && steps < max_steps) {
    const double ms = step_ms(tuner.fusion_threshold_bytes(), tuner.cycle_time_ms());
    for (int t = 0; t < kTensors; ++t) {
      now += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double, std::milli>(ms / kTensors));
      tuner.Observe({"grad/" + std::to_string(t)}, kTensorBytes, now);
    }
    ++steps;
  }
  return steps;
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
  CHECK(lines[0] == "fusion_threshold_bytes,cycle_time_ms,score_bytes_per_second");
  const int64_t expected[] = {64, 128, 32, 16, 8, 16, 16};
  for (int i = 0; i < 7; ++i) {
    INFO(lines[1 + i]);
    CHECK(lines[1 + i].rfind(std::to_string(expected[i] * kMiB) + ",", 0) == 0);
  }
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
