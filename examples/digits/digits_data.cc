// Loading and splitting of the digits data set; see digits_data.h.
#include "examples/digits/digits_data.h"

#include <charconv>
#include <fstream>
#include <numeric>
#include <sstream>

#include "examples/digits/split_mix.h"

namespace kolo::examples {
namespace {

// Parses one CSV row into `out`; returns an error message or "".
std::string ParseRow(const std::string& line, Dataset* out) {
  std::istringstream fields(line);
  std::string field;
  std::vector<int> values;
  while (std::getline(fields, field, ',')) {
    int value = 0;
    auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (error != std::errc() || end != field.data() + field.size() || field.empty()) {
      return "'" + field + "' is not an integer";
    }
    values.push_back(value);
  }
  if (values.size() != kDigitsFeatures + 1) {
    return "expected " + std::to_string(kDigitsFeatures + 1) + " values, found " +
           std::to_string(values.size());
  }
  for (int i = 0; i < kDigitsFeatures; ++i) {
    if (values[i] < 0 || values[i] > 16) return "pixel value out of 0..16";
    out->features.push_back(static_cast<float>(values[i]) / 16.0f);
  }
  if (values.back() < 0 || values.back() >= kDigitsClasses) return "label out of 0..9";
  out->labels.push_back(values.back());
  return "";
}

}  // namespace

StatusOr<Dataset> LoadDigitsCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot open the digits data '" + path + "'");
  Dataset data;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::string error = ParseRow(line, &data);
    if (!error.empty()) {
      return InvalidArgument(path + ":" + std::to_string(number) + ": " + error);
    }
  }
  if (data.size() == 0) return InvalidArgument("'" + path + "' holds no samples");
  return data;
}

std::vector<int> ShuffledIndices(int n, uint64_t seed) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  SplitMix64 rng(seed);
  for (int i = n - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(order[i], order[rng.NextBelow(static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

TrainTestSplit SplitTrainTest(const Dataset& all, int test_size, uint64_t seed) {
  TrainTestSplit split;
  std::vector<int> order = ShuffledIndices(all.size(), seed);
  for (int k = 0; k < all.size(); ++k) {
    Dataset& into = k < test_size ? split.test : split.train;
    const float* x = all.sample(order[k]);
    into.features.insert(into.features.end(), x, x + kDigitsFeatures);
    into.labels.push_back(all.labels[order[k]]);
  }
  return split;
}

}  // namespace kolo::examples
