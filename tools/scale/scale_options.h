// The command line of kolo-scale (tools/scale/main.cc): which rank counts to simulate, how many
// cached steps, which model's gradients. Plain value type and a pure parser; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::scale {

struct ScaleOptions {
  std::vector<int> ranks = {16, 64, 256, 1024};  // --ranks 16,64
  int steps = 20;                                // --steps: cached steps after the first
  std::string model = "resnet50";                // --model
  double timeout_seconds = 300;                  // --timeout: every wait of one rank count
  int drivers = 0;  // --drivers: threads that play the ranks' background threads (0: cores)
  // --relays: control relays in the ranks process (transport/grpc/control_relay.h), each for
  // ceil(N / relays) consecutive ranks; 0: every rank's stream goes to the controller.
  int relays = 0;
  bool help = false;
};

// Parses argv[1..]; an error names the flag and what was wrong with its value.
StatusOr<ScaleOptions> ParseScaleOptions(int argc, const char* const* argv);

// The --help text.
std::string ScaleUsage();

}  // namespace kolo::scale
