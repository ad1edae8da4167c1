// The 8x8 handwritten digits data set (examples/data/digits.csv): loading, a fixed
// train/test split and deterministic shuffling. Plain values; no threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::examples {

constexpr int kDigitsFeatures = 64;  // 8x8 pixels
constexpr int kDigitsClasses = 10;

struct Dataset {
  std::vector<float> features;  // size() * kDigitsFeatures values in [0, 1] (pixel / 16)
  std::vector<int> labels;      // 0..9
  int size() const { return static_cast<int>(labels.size()); }
  const float* sample(int i) const { return &features[static_cast<size_t>(i) * kDigitsFeatures]; }
};

// Reads rows of 64 pixel values (0..16) and a label (0..9). Fails naming the file and line.
StatusOr<Dataset> LoadDigitsCsv(const std::string& path);

struct TrainTestSplit {
  Dataset train;
  Dataset test;
};
// Shuffles the samples with `seed` and puts the first `test_size` into the test set.
TrainTestSplit SplitTrainTest(const Dataset& all, int test_size, uint64_t seed);

// A permutation of 0..n-1, the same for the same seed on every rank.
std::vector<int> ShuffledIndices(int n, uint64_t seed);

}  // namespace kolo::examples
