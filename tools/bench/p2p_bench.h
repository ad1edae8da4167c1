// kolo-bench --pingpong: point-to-point (kolo/p2p.h) between ranks 0 and 1, timed as the OSU
// micro-benchmarks time MPI: per size, the one-way latency (half a round trip of a send and its
// echo, median over iterations) and the streaming bandwidth (a window of sends in flight at once,
// then a one-byte reply). tools/bench/mpi_p2p_bench.cc times Open MPI the same way. Runs between
// kolo::init() and kolo::shutdown() on every rank; ranks beyond 1 only wait; rank 0 prints.
#pragma once

#include "tools/bench/bench_options.h"

namespace kolo::bench {

// Returns the exit code: 0, 1 if a result was wrong or an op failed.
int RunPingPongBench(const BenchOptions& options);

}  // namespace kolo::bench
