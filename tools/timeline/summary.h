// The numbers `kolo-timeline summary` reports, computed from a TraceModel: negotiation wait
// per tensor and who was last, stragglers, wall time per rank and phase, bytes and bandwidth,
// fusion group sizes. Pure functions over plain structs (summary_format.h prints them).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/timeline/trace_model.h"

namespace kolo::timeline {

// Negotiation waits (NEGOTIATE_* B -> E) of some set of negotiations.
struct WaitStats {
  int64_t count = 0;
  double total_us = 0;
  double max_us = 0;
  std::map<int, int64_t> last_rank_counts;  // rank -> times it announced last
  double mean_us() const { return count == 0 ? 0 : total_us / static_cast<double>(count); }
  void Add(const Negotiation& negotiation);
};

struct TensorWait {
  std::string tensor;
  std::string op;
  WaitStats wait;
};

// A rank as the last to announce: the wait of those negotiations is charged to it.
struct Straggler {
  int rank = 0;
  int64_t times_last = 0;
  double wait_caused_us = 0;
};

// Per rank (or all ranks): wall time in each phase, where spans of several tensors that
// overlap (fused phases repeat on every member's track) count once.
struct RankTotals {
  int rank = -1;  // -1 for the all-ranks row
  std::array<double, kNumPhases> phase_us{};
  int64_t ops = 0;         // op spans that ended
  int64_t failed_ops = 0;  // of which status != "OK"
  int64_t bytes = 0;       // sum of args.bytes of the OK ones
  double us(Phase phase) const { return phase_us[static_cast<int>(phase)]; }
  double copies_us() const { return us(Phase::kCopyIn) + us(Phase::kCopyOut); }
  // Shares of copies+transfer time; 0 when neither happened.
  double copy_share() const;
  double transfer_share() const;
  // bytes / transfer time (algorithm bandwidth, like nccl-tests' algbw); 0 without transfers.
  double bytes_per_second() const;
};

struct FusionStats {
  std::map<int64_t, int64_t> groups_by_size;  // tensors per response -> responses
  int64_t groups = 0;
  int64_t tensors = 0;
};

// Overlap of one rank's data movement with the work between its ops, over the steps that
// FindSteps (plot_window.h) finds: bursts of op spans between idle gaps, such as the backward
// pass of a training step whose gradient hooks enqueue allreduces as they fire. Within a step,
// the rank's copies and transfers that ran before its last enqueue of the step overlapped the
// work that produced the later ops; what ran after it is the step's tail, which a
// synchronize() at the end of the step waits for.
struct OverlapStats {
  int rank = 0;
  int64_t steps = 0;         // steps in which the rank has op spans
  double movement_us = 0;    // copies + transfer in those steps (wall time, counted once)
  double overlapped_us = 0;  // the part of movement_us before the rank's last enqueue
  double tail_us = 0;        // sum over the steps: last op's end - last enqueue
  // overlapped_us / movement_us; 0 without data movement.
  double overlapped_share() const;
  // Per step; 0 without steps.
  double movement_per_step_us() const;
  double tail_per_step_us() const;
};

struct Summary {
  std::vector<RankInfo> ranks;
  double begin_us = 0;
  double end_us = 0;
  std::vector<TensorWait> tensors;  // most total wait first
  WaitStats all_negotiations;
  std::vector<Straggler> stragglers;  // one per rank, by rank
  std::vector<RankTotals> per_rank;   // one per rank, by rank
  RankTotals all_ranks;
  FusionStats fusion;
  std::vector<OverlapStats> overlap;  // one per rank with op spans, by rank
  std::vector<std::string> warnings;
};

Summary Summarize(const TraceModel& model);

}  // namespace kolo::timeline
