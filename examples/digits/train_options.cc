// Flag parsing for kolo-train-digits; see train_options.h.
#include "examples/digits/train_options.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace kolo::examples {
namespace {

Status ParseInt(const std::string& flag, const std::string& text, int64_t lo, int64_t hi,
                int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || value < lo || value > hi) {
    return InvalidArgument(flag + " must be an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got '" + text + "'");
  }
  *out = value;
  return Status::Ok();
}

Status ParseDouble(const std::string& flag, const std::string& text, double* out) {
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0' || !std::isfinite(value) || value <= 0) {
    return InvalidArgument(flag + " must be a positive number, got '" + text + "'");
  }
  *out = value;
  return Status::Ok();
}

// Stores `value` of `flag` into `options`.
Status SetFlag(const std::string& flag, const std::string& value, TrainOptions* options) {
  int64_t n = 0;
  if (flag == "--data") {
    options->data_path = value;
  } else if (flag == "--lr") {
    return ParseDouble(flag, value, &options->learning_rate);
  } else if (flag == "--seed") {
    KOLO_RETURN_IF_ERROR(ParseInt(flag, value, 0, INT64_MAX, &n));
    options->seed = static_cast<uint64_t>(n);
  } else if (flag == "--epochs" || flag == "--batch-size" || flag == "--hidden" ||
             flag == "--log-every" || flag == "--test-size") {
    const bool may_be_zero = flag == "--log-every";
    KOLO_RETURN_IF_ERROR(ParseInt(flag, value, may_be_zero ? 0 : 1, 1 << 20, &n));
    int* field = flag == "--epochs"       ? &options->epochs
                 : flag == "--batch-size" ? &options->batch_size
                 : flag == "--hidden"     ? &options->hidden
                 : flag == "--log-every"  ? &options->log_every
                                          : &options->test_size;
    *field = static_cast<int>(n);
  } else {
    return InvalidArgument("unknown argument '" + flag + "'");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<TrainOptions> ParseTrainOptions(const std::vector<std::string>& args,
                                         const std::string& default_data) {
  TrainOptions options;
  options.data_path = default_data;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    if (flag == "-h" || flag == "--help") {
      options.show_help = true;
      return options;
    }
    std::string value;
    size_t eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return InvalidArgument(flag.rfind("--", 0) == 0 ? flag + " needs a value"
                                                      : "unknown argument '" + flag + "'");
    }
    KOLO_RETURN_IF_ERROR(SetFlag(flag, value, &options));
  }
  return options;
}

std::string TrainUsage() {
  return R"(Usage: kolo-train-digits [flags]              (one process)
       kolorun -np N kolo-train-digits [flags]   (N ranks, data parallel)
Trains a 64-hidden-10 perceptron on the 8x8 handwritten digits with kolo allreduce.

  --epochs N       passes over the training set (default 10)
  --batch-size B   global batch, split evenly across ranks; N must divide it (default 64)
  --hidden H       hidden units (default 64)
  --lr X           SGD learning rate (default 0.3)
  --seed S         seed of the weights, the split and the data order (default 1)
  --log-every K    rank 0 prints the loss every K steps; 0: only per epoch (default 10)
  --test-size N    samples held out for testing (default 297)
  --data PATH      the digits CSV (default: examples/data/digits.csv of the source tree)

Every rank ends with "final: accuracy=A weights_checksum=0x..."; the checksums are equal on
all ranks, and the accuracy matches a one-process run with the same flags.
)";
}

}  // namespace kolo::examples
