// Summary statistics of a benchmark's samples, shared by kolo-bench's modes (the model step,
// the point-to-point latency). Pure functions; any thread.
#pragma once

#include <vector>

namespace kolo::bench {

// The middle sample (the mean of the two middle ones for an even count); 0 for no samples.
double Median(std::vector<double> samples);

}  // namespace kolo::bench
