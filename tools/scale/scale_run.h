// One rank count's run of kolo-scale, in the ranks process: start-up of N simulated ranks
// against the controller process, the first step and the cached steps, each timed and checked,
// with the controller process's CPU time and memory sampled around each (ControllerProbe).
// Pure driving and arithmetic; runs on the caller's thread (RankSwarm starts its own).
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"
#include "tools/scale/controller_host.h"
#include "tools/scale/scale_options.h"
#include "transport/auth/hmac_auth.h"

namespace kolo::scale {

struct ScaleRow {
  int ranks = 0;
  double startup_ms = 0;               // first Hello sent to every rank holding the peer table
  double controller_rss_mb = 0;        // controller process RSS after the last step
  double controller_kib_per_rank = 0;  // its RSS growth from listening to every rank joined, / N
  int controller_threads = 0;          // after every rank joined
  double client_kib_per_rank = 0;      // ranks process RSS growth through start-up, / N
  double first_step_ms = 0;            // wall: full metadata, negotiated, fused responses
  double first_step_cpu_ms = 0;        // controller process CPU during it
  double cached_step_ms = 0;           // wall, median over the cached steps
  double cached_step_cpu_ms = 0;       // controller process CPU, median over the cached steps
  double cached_step_cpu_max_ms = 0;
  double client_cpu_us_per_rank = 0;  // ranks process CPU per cached step, / N (median)
  int responses = 0;                  // response entries per step
  int tensors = 0;                    // gradients decided per step on every rank
};

// Runs `ranks` ranks against the controller process behind `probe`.
StatusOr<ScaleRow> RunScale(int ranks, const ScaleOptions& options,
                            const transport::JobCredentials& credentials, ControllerProbe* probe);

// The table's header lines and one row (Markdown).
std::string TableHeader();
std::string TableRow(const ScaleRow& row);
// "every rank ..." line that says what was checked for `row`, `steps` steps after the first.
std::string CheckLine(const ScaleRow& row, int steps);

}  // namespace kolo::scale
