// Autotuner: KOLO_AUTOTUNE (Horovod's HOROVOD_AUTOTUNE). Rank 0 tunes the fusion threshold, the
// controller's cycle time and, in a job with a hierarchy and KOLO_HIERARCHICAL=auto, the
// hierarchical choice while the job trains, from the allreduce throughput it measures, then
// keeps the best and stops (docs/SCALE.md, "Autotuning").
//
// What it measures: every allreduce rank 0 runs (the controller's responses and the fast path's
// rounds alike) is reported with its tensor names and bytes. A *sample* ends once some tensor
// name has run `steps_per_sample` times since the sample began (with one allreduce per gradient,
// that is that many training steps); its score is the bytes allreduced per second over it, the
// compute between steps included, so the score follows the step time. A setting's score is the
// median of `samples_per_setting` samples; the first sample after a change is dropped (work
// already decided still ran under the old setting), and `warmup_samples` more at the start
// (caches, first negotiations).
//
// How it searches: a hill climb on a doubling grid, one parameter at a time, from the configured
// values: the fusion threshold first (x2 while that gains more than `min_gain`, else /2 while
// that does), then the cycle time the same way, then (TuneHierarchy) the hierarchical rule's
// minimum size along 0, 4 KiB, 8 KiB, ..., 64 MiB, flat (never): its two ends first (flat,
// then always), then the climb from the best of those and the start. Each parameter ends at its
// best setting seen; then tuning is over and the best values stay. Horovod fits a Gaussian process
// over both parameters at once; along a doubling grid a climb needs fewer settings (3 to 6 here,
// against Horovod's 20 samples), and both are at the mercy of the score's noise.
//
// How the ranks follow: only rank 0 tunes. Its fast path sends the tuned threshold in its round
// messages while every other rank with KOLO_AUTOTUNE sends "no limit", so the rounds' rule (the
// smallest threshold any rank sent) gives every rank the tuned one; the hierarchical rule
// travels the same way (its "no limit" is flat). The controller, on rank 0, reads the values
// here and puts the hierarchical rule into its allreduce responses, so every rank runs each op
// by the rule its round or its response carries (ops/cpu_executor.h).
//
// The measuring is AutotunerSampler's (core/autotuner_sampler.h); the search is this class's.
//
// Threading: TuneHierarchy before the first Observe; Observe on one thread (rank 0's loop
// thread); the getters on any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/autotuner_sampler.h"
#include "core/logging.h"

namespace kolo {

class Autotuner {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  struct Config {
    int64_t threshold_bytes = int64_t{64} << 20;  // where the climb starts (KOLO_FUSION_THRESHOLD)
    double cycle_ms = 1;                          // (KOLO_CYCLE_TIME_MS)
    int warmup_samples = 3;                       // KOLO_AUTOTUNE_WARMUP_SAMPLES
    int steps_per_sample = 10;                    // KOLO_AUTOTUNE_STEPS_PER_SAMPLE
    int samples_per_setting = 3;                  // KOLO_AUTOTUNE_SAMPLES
    double min_gain = 0.03;  // a neighbour must score this much better to be moved to
    // KOLO_AUTOTUNE_LOG: one CSV line per setting scored, after a header; empty: none.
    std::string log_path;
    Logger logger;  // null: an "autotune" logger at info level
  };

  // The grid's ends: the threshold doubles or halves within [kMinThreshold, kMaxThreshold], the
  // cycle time within [kMinCycleMs, kMaxCycleMs]; a configured value outside them starts there.
  static constexpr int64_t kMinThreshold = int64_t{256} << 10;
  static constexpr int64_t kMaxThreshold = int64_t{1} << 30;
  static constexpr double kMinCycleMs = 0.25;
  static constexpr double kMaxCycleMs = 64;
  // The hierarchical rule's grid (core/hierarchy_rule.h): 0 (always), then kMinHierarchyBytes
  // doubling to kMaxHierarchyBytes, then kHierarchyFlat (never).
  static constexpr uint64_t kMinHierarchyBytes = uint64_t{4} << 10;
  static constexpr uint64_t kMaxHierarchyBytes = uint64_t{64} << 20;

  explicit Autotuner(Config config);

  // Tunes the hierarchical choice too, from `start_min_bytes` (KOLO_HIERARCHICAL=auto's rule;
  // put on the grid: a value between its points stays, beyond its ends goes to the end). Call
  // before the first Observe, only in a job whose allreduces can run hierarchically.
  void TuneHierarchy(uint64_t start_min_bytes);

  // Rank 0 ran an allreduce of `names` moving `bytes` (the sum of its tensors) at `now`.
  void Observe(const std::vector<std::string>& names, int64_t bytes, TimePoint now);

  // The values in force: the setting being scored while tuning, the best one after.
  int64_t fusion_threshold_bytes() const { return threshold_.load(std::memory_order_relaxed); }
  double cycle_time_ms() const { return cycle_ms_.load(std::memory_order_relaxed); }
  bool done() const { return done_.load(std::memory_order_relaxed); }
  // Whether TuneHierarchy was called; then hierarchy_min_bytes() is the rule in force.
  bool tunes_hierarchy() const { return tunes_hierarchy_.load(std::memory_order_relaxed); }
  uint64_t hierarchy_min_bytes() const {
    return hierarchy_min_bytes_.load(std::memory_order_relaxed);
  }

 private:
  enum class Parameter { kThreshold, kCycle, kHierarchy };
  enum class Direction { kUp, kDown };
  struct Setting {
    int64_t threshold_bytes;
    double cycle_ms;
    uint64_t hierarchy_min_bytes;  // while tunes_hierarchy()
  };

  void Scored(double score);
  // best_ with the current parameter doubled (kUp) or halved, if the grid goes that far.
  std::optional<Setting> Neighbor(Direction direction) const;
  // The next setting of the current parameter's climb; false when it is settled.
  bool NextCandidate(Setting* next);
  // Moves on to the next parameter to climb; false when there is none.
  bool NextParameter();
  void Apply(const Setting& setting);
  void Finish();
  // The setting as the log shows it.
  std::string Describe(const Setting& setting) const;

  // Constant after construction.
  const Config config_;
  const Logger logger_;

  std::atomic<int64_t> threshold_;
  std::atomic<double> cycle_ms_;
  std::atomic<bool> done_{false};
  std::atomic<bool> tunes_hierarchy_{false};
  std::atomic<uint64_t> hierarchy_min_bytes_{0};

  // Loop thread only.
  std::ofstream log_;
  Parameter parameter_ = Parameter::kThreshold;
  Direction direction_ = Direction::kUp;
  bool moved_ = false;  // the current parameter's climb found a better setting
  // The hierarchical rule's ends (flat, then always), scored before its climb: a step of the
  // doubling grid moves one op size at a time, often less than min_gain, so a climb alone
  // stops next to its start even where flat or always is far better.
  std::vector<uint64_t> probes_;
  bool probing_ = false;  // current_ is one of those ends
  Setting current_{};     // being scored
  Setting best_{};
  double best_score_ = -1;
  int settings_scored_ = 0;
  AutotunerSampler sampler_;  // the scores of the setting being scored
};

}  // namespace kolo
