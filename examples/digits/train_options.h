// TrainOptions: the command line of kolo-train-digits. Parsing is a pure function; the
// program prints the usage text and the errors it returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::examples {

struct TrainOptions {
  int epochs = 10;
  int batch_size = 64;  // global: split evenly across the ranks
  int hidden = 64;
  double learning_rate = 0.3;
  uint64_t seed = 1;
  int log_every = 10;   // steps between rank 0's loss lines; 0: only per epoch
  int test_size = 297;  // samples held out for the test set (of 1797)
  std::string data_path;
  bool show_help = false;
};

// Flags: --epochs N, --batch-size N, --hidden N, --lr X, --seed N, --log-every N,
// --test-size N, --data PATH, as "--flag value" or "--flag=value". `default_data` is the
// data path unless --data is given.
StatusOr<TrainOptions> ParseTrainOptions(const std::vector<std::string>& args,
                                         const std::string& default_data);

std::string TrainUsage();

}  // namespace kolo::examples
