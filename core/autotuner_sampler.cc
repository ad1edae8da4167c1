#include "core/autotuner_sampler.h"

#include <algorithm>

namespace kolo {
namespace {

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

AutotunerSampler::AutotunerSampler(int steps_per_sample, int samples_per_setting,
                                   int warmup_samples)
    : steps_per_sample_(std::max(steps_per_sample, 1)),
      samples_per_setting_(std::max(samples_per_setting, 1)),
      to_skip_(std::max(warmup_samples, 0)) {}

std::optional<double> AutotunerSampler::Observe(const std::vector<std::string>& names,
                                                int64_t bytes, TimePoint now) {
  if (!sampling_) {
    sampling_ = true;
    sample_start_ = now;
  }
  sample_bytes_ += bytes;
  int most = 0;
  for (const std::string& name : names) most = std::max(most, ++runs_[name]);
  if (most >= steps_per_sample_) return EndSample(now);
  return std::nullopt;
}

std::optional<double> AutotunerSampler::EndSample(TimePoint now) {
  const double seconds = std::chrono::duration<double>(now - sample_start_).count();
  const double score = static_cast<double>(sample_bytes_) / std::max(seconds, 1e-9);
  sample_start_ = now;  // the next sample starts where this one ends
  sample_bytes_ = 0;
  runs_.clear();
  if (to_skip_ > 0) {
    --to_skip_;
    return std::nullopt;
  }
  scores_.push_back(score);
  if (static_cast<int>(scores_.size()) < samples_per_setting_) return std::nullopt;
  const double median = Median(scores_);
  scores_.clear();
  return median;
}

void AutotunerSampler::Restart() {
  to_skip_ = 1;
  scores_.clear();
}

}  // namespace kolo
