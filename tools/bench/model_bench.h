// kolo-bench --model: one training step's gradients through the runtime against one raw
// allreduce of the same bytes through the data plane alone (docs/PERFORMANCE.md, target 3). Runs
// between kolo::init() and kolo::shutdown() on every rank; rank 0 prints.
#pragma once

#include "tools/bench/bench_options.h"

namespace kolo::bench {

// Returns the exit code: 0, 1 if a result was wrong or an op failed.
int RunModelBench(const BenchOptions& options);

}  // namespace kolo::bench
