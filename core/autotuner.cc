#include "core/autotuner.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "core/hierarchy_rule.h"
#include "core/op_text.h"

namespace kolo {
namespace {

int64_t ClampThreshold(int64_t bytes) {
  return std::clamp(bytes, Autotuner::kMinThreshold, Autotuner::kMaxThreshold);
}

double ClampCycle(double ms) {
  return std::clamp(ms, Autotuner::kMinCycleMs, Autotuner::kMaxCycleMs);
}

uint64_t ClampHierarchy(uint64_t min_bytes) {
  if (min_bytes == 0 || min_bytes == kHierarchyFlat) return min_bytes;
  return std::clamp(min_bytes, Autotuner::kMinHierarchyBytes, Autotuner::kMaxHierarchyBytes);
}

// The hierarchical rule's neighbour on its grid: 0, kMinHierarchyBytes, x2, ...,
// kMaxHierarchyBytes, kHierarchyFlat. At an end, the end itself.
uint64_t HierarchyStep(uint64_t min_bytes, bool up) {
  constexpr uint64_t kMin = Autotuner::kMinHierarchyBytes;
  constexpr uint64_t kMax = Autotuner::kMaxHierarchyBytes;
  if (up) {
    if (min_bytes == kHierarchyFlat) return min_bytes;
    if (min_bytes == 0) return kMin;
    return min_bytes >= kMax ? kHierarchyFlat : std::min(min_bytes * 2, kMax);
  }
  if (min_bytes == 0) return 0;
  if (min_bytes == kHierarchyFlat) return kMax;
  return min_bytes <= kMin ? 0 : std::max(min_bytes / 2, kMin);
}

// The hierarchical rule as the log shows it: "flat", "0", "65536" (the CSV) or sizes.
std::string HierarchyText(uint64_t min_bytes, bool csv) {
  if (min_bytes == kHierarchyFlat) return csv ? "flat" : "never (flat)";
  if (csv) return std::to_string(min_bytes);
  if (min_bytes == 0) return "always";
  return "from " + FormatBytes(static_cast<size_t>(min_bytes));
}

}  // namespace

Autotuner::Autotuner(Config config)
    : config_(std::move(config)),
      logger_(config_.logger ? config_.logger : MakeLogger(0, "autotune", spdlog::level::info)),
      threshold_(ClampThreshold(config_.threshold_bytes)),
      cycle_ms_(ClampCycle(config_.cycle_ms)),
      sampler_(config_.steps_per_sample, config_.samples_per_setting, config_.warmup_samples) {
  current_ = best_ = Setting{threshold_.load(), cycle_ms_.load(), kHierarchyFlat};
  hierarchy_min_bytes_.store(kHierarchyFlat, std::memory_order_relaxed);
  if (!config_.log_path.empty()) {
    log_.open(config_.log_path, std::ios::out | std::ios::trunc);
    if (log_) {
      log_ << "fusion_threshold_bytes,cycle_time_ms,hierarchical_min_bytes,"
              "score_bytes_per_second\n";
    } else {
      logger_->warn("autotune: cannot write KOLO_AUTOTUNE_LOG={}; tuning without it",
                    config_.log_path);
    }
  }
  logger_->info(
      "autotune: starting at {}; {} warm-up samples, then the median of {} samples of {} steps "
      "per setting",
      Describe(current_), sampler_.samples_to_skip(), config_.samples_per_setting,
      config_.steps_per_sample);
}

void Autotuner::TuneHierarchy(uint64_t start_min_bytes) {
  const uint64_t min_bytes = ClampHierarchy(start_min_bytes);
  current_.hierarchy_min_bytes = best_.hierarchy_min_bytes = min_bytes;
  hierarchy_min_bytes_.store(min_bytes, std::memory_order_relaxed);
  tunes_hierarchy_.store(true, std::memory_order_relaxed);
  logger_->info(
      "autotune: tuning the hierarchical choice too, after the cycle time: starting "
      "hierarchical {}",
      HierarchyText(min_bytes, /*csv=*/false));
}

void Autotuner::Observe(const std::vector<std::string>& names, int64_t bytes, TimePoint now) {
  if (done_.load(std::memory_order_relaxed)) return;
  if (std::optional<double> score = sampler_.Observe(names, bytes, now)) Scored(*score);
}

void Autotuner::Scored(double score) {
  ++settings_scored_;
  logger_->info("autotune: {}: {:.1f} MB/s", Describe(current_), score / 1e6);
  if (log_) {
    log_ << current_.threshold_bytes << ',' << current_.cycle_ms << ','
         << (tunes_hierarchy() ? HierarchyText(current_.hierarchy_min_bytes, /*csv=*/true) : "")
         << ',' << score << '\n';
    log_.flush();
  }
  bool parameter_done = false;
  if (settings_scored_ == 1) {
    best_score_ = score;  // the starting point: the climb begins from it
  } else if (score > best_score_ * (1 + config_.min_gain)) {
    best_ = current_;
    best_score_ = score;
    moved_ = !probing_;  // an end that wins is where the climb starts, not a step of it
  } else if (probing_) {
    // An end that did not pay: the next end, or the climb from the best so far.
  } else if (direction_ == Direction::kUp && !moved_) {
    direction_ = Direction::kDown;  // up did not pay from the start: try down
  } else {
    parameter_done = true;
  }
  Setting next{};
  bool more = !parameter_done && NextCandidate(&next);
  while (!more && NextParameter()) more = NextCandidate(&next);
  if (!more) {
    Finish();
    return;
  }
  Apply(next);
}

bool Autotuner::NextParameter() {
  switch (parameter_) {
    case Parameter::kThreshold:
      logger_->info("autotune: fusion threshold settled at {}",
                    FormatBytes(static_cast<size_t>(best_.threshold_bytes)));
      parameter_ = Parameter::kCycle;
      break;
    case Parameter::kCycle:
      if (!tunes_hierarchy()) return false;
      logger_->info("autotune: cycle time settled at {:g} ms", best_.cycle_ms);
      parameter_ = Parameter::kHierarchy;
      for (uint64_t end : {kHierarchyFlat, uint64_t{0}}) {
        if (end != best_.hierarchy_min_bytes) probes_.push_back(end);
      }
      break;
    case Parameter::kHierarchy:
      return false;
  }
  direction_ = Direction::kUp;
  moved_ = false;
  return true;
}

std::optional<Autotuner::Setting> Autotuner::Neighbor(Direction direction) const {
  Setting next = best_;
  const bool up = direction == Direction::kUp;
  switch (parameter_) {
    case Parameter::kThreshold:
      next.threshold_bytes =
          ClampThreshold(up ? best_.threshold_bytes * 2 : best_.threshold_bytes / 2);
      if (next.threshold_bytes == best_.threshold_bytes) return std::nullopt;
      break;
    case Parameter::kCycle:
      next.cycle_ms = ClampCycle(up ? best_.cycle_ms * 2 : best_.cycle_ms / 2);
      if (next.cycle_ms == best_.cycle_ms) return std::nullopt;
      break;
    case Parameter::kHierarchy:
      next.hierarchy_min_bytes = HierarchyStep(best_.hierarchy_min_bytes, up);
      if (next.hierarchy_min_bytes == best_.hierarchy_min_bytes) return std::nullopt;
      break;
  }
  return next;
}

bool Autotuner::NextCandidate(Setting* next) {
  probing_ = !probes_.empty();
  if (probing_) {
    *next = best_;
    next->hierarchy_min_bytes = probes_.front();
    probes_.erase(probes_.begin());
    return true;
  }
  for (;;) {
    if (std::optional<Setting> neighbor = Neighbor(direction_)) {
      *next = *neighbor;
      return true;
    }
    // The grid ends this way.
    if (direction_ == Direction::kUp && !moved_) {
      direction_ = Direction::kDown;
      continue;
    }
    return false;
  }
}

void Autotuner::Apply(const Setting& setting) {
  current_ = setting;
  threshold_.store(setting.threshold_bytes, std::memory_order_relaxed);
  cycle_ms_.store(setting.cycle_ms, std::memory_order_relaxed);
  hierarchy_min_bytes_.store(setting.hierarchy_min_bytes, std::memory_order_relaxed);
  sampler_.Restart();  // work decided before the change still runs under the old setting
}

void Autotuner::Finish() {
  Apply(best_);
  done_.store(true, std::memory_order_relaxed);
  logger_->info("autotune: done after {} settings: {} ({:.1f} MB/s)", settings_scored_,
                Describe(best_), best_score_ / 1e6);
}

std::string Autotuner::Describe(const Setting& setting) const {
  char cycle[32];
  std::snprintf(cycle, sizeof(cycle), "%g ms", setting.cycle_ms);
  std::string text = "fusion threshold " +
                     FormatBytes(static_cast<size_t>(setting.threshold_bytes)) + ", cycle time " +
                     cycle;
  if (tunes_hierarchy()) {
    text += ", hierarchical " + HierarchyText(setting.hierarchy_min_bytes, /*csv=*/false);
  }
  return text;
}

}  // namespace kolo
