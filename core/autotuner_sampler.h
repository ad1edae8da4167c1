// AutotunerSampler: the measuring half of the Autotuner (core/autotuner.h), which owns one and
// does the searching. It turns the allreduces rank 0 reports into one score per setting: a
// sample ends once some tensor name has run `steps_per_sample` times since it began, and scores
// the bytes allreduced per second over it; a setting's score is the median of
// `samples_per_setting` samples. Samples to drop (the warm-up at the start, the first after each
// change of setting) are counted but not scored.
//
// Threading: one thread (rank 0's loop thread, the Autotuner's Observe).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kolo {

class AutotunerSampler {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Values below 1 count as 1 (steps, samples) or 0 (warm-up).
  AutotunerSampler(int steps_per_sample, int samples_per_setting, int warmup_samples);

  // An allreduce of `names` moving `bytes` (the sum of its tensors) ran at `now`. Returns the
  // setting's score (bytes per second, the median of its samples) when this completed it.
  std::optional<double> Observe(const std::vector<std::string>& names, int64_t bytes,
                                TimePoint now);

  // The setting changed: the next sample is dropped (work decided before the change still runs
  // under the old setting) and the samples scored so far are forgotten.
  void Restart();

  // Samples still to drop before scoring counts (the warm-up, at first).
  int samples_to_skip() const { return to_skip_; }

 private:
  std::optional<double> EndSample(TimePoint now);

  const int steps_per_sample_;
  const int samples_per_setting_;
  int to_skip_;
  std::vector<double> scores_;  // of the setting being scored
  // The sample in progress.
  bool sampling_ = false;
  TimePoint sample_start_{};
  int64_t sample_bytes_ = 0;
  std::unordered_map<std::string, int> runs_;  // by tensor name, since the sample began
};

}  // namespace kolo
