#include "tools/scale/scale_options.h"

#include <cstdlib>
#include <sstream>

namespace kolo::scale {
namespace {

StatusOr<long> ParseLong(const std::string& flag, const std::string& text, long low, long high) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < low || value > high) {
    return InvalidArgument(flag + " takes a whole number in [" + std::to_string(low) + ", " +
                           std::to_string(high) + "], not '" + text + "'");
  }
  return value;
}

StatusOr<std::vector<int>> ParseRanks(const std::string& text) {
  std::vector<int> ranks;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    KOLO_ASSIGN_OR_RETURN(const long n, ParseLong("--ranks", item, 1, 4096));
    ranks.push_back(static_cast<int>(n));
  }
  if (ranks.empty()) return InvalidArgument("--ranks takes a list such as 16,64,256,1024");
  return ranks;
}

}  // namespace

std::string ScaleUsage() {
  return "usage: kolo-scale [--ranks 16,64,256,1024] [--steps 20] [--model resnet50]\n"
         "                  [--timeout 300] [--drivers 0] [--relays 0]\n"
         "Runs kolo's real controller behind its real gRPC server in one process and N\n"
         "simulated ranks, each a real gRPC control channel, in another; prints start-up time,\n"
         "memory and the controller's negotiation cost per step (docs/SCALE.md). --relays R:\n"
         "the ranks' streams go to R control relays in the ranks process, which alone talk\n"
         "to the controller.\n";
}

StatusOr<ScaleOptions> ParseScaleOptions(int argc, const char* const* argv) {
  ScaleOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      options.help = true;
      continue;
    }
    if (i + 1 >= argc) return InvalidArgument("unknown flag or missing value: '" + flag + "'");
    const std::string value = argv[++i];
    if (flag == "--ranks") {
      KOLO_ASSIGN_OR_RETURN(options.ranks, ParseRanks(value));
    } else if (flag == "--steps") {
      KOLO_ASSIGN_OR_RETURN(const long steps, ParseLong(flag, value, 1, 100000));
      options.steps = static_cast<int>(steps);
    } else if (flag == "--model") {
      options.model = value;
    } else if (flag == "--timeout") {
      KOLO_ASSIGN_OR_RETURN(const long seconds, ParseLong(flag, value, 1, 86400));
      options.timeout_seconds = static_cast<double>(seconds);
    } else if (flag == "--drivers") {
      KOLO_ASSIGN_OR_RETURN(const long drivers, ParseLong(flag, value, 0, 1024));
      options.drivers = static_cast<int>(drivers);
    } else if (flag == "--relays") {
      KOLO_ASSIGN_OR_RETURN(const long relays, ParseLong(flag, value, 0, 4096));
      options.relays = static_cast<int>(relays);
    } else {
      return InvalidArgument("unknown flag '" + flag + "'\n" + ScaleUsage());
    }
  }
  return options;
}

}  // namespace kolo::scale
