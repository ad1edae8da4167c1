// Multi-rank runs of the digits training example under the real kolorun: the weights must end
// bit-identical on every rank, and a 4-rank run must reach the accuracy of a 1-rank run with
// the same global batch (the averaged gradient differs only in float summation order).
#include <catch2/catch.hpp>
#include <regex>

#include "tests/support/child_process.h"
#include "tests/support/watchdog.h"

namespace kolo::testing {
namespace {

using std::chrono::seconds;

struct FinalLine {
  int rank = -1;
  double accuracy = 0;
  std::string checksum;
};

std::vector<FinalLine> ParseFinalLines(const std::string& out) {
  static const std::regex final_line(
      R"(\[(\d+)\] final: accuracy=([\d.]+) weights_checksum=(0x[0-9a-f]{16}))");
  std::vector<FinalLine> lines;
  for (const std::string& line : SplitLines(out)) {
    std::smatch m;
    if (std::regex_match(line, m, final_line)) {
      lines.push_back({std::stoi(m[1]), std::stod(m[2]), m[3]});
    }
  }
  return lines;
}

ProcessResult Train(int ranks, const std::vector<std::string>& flags = {}) {
  std::vector<std::string> argv = {KOLORUN_PATH, "-np", std::to_string(ranks), TRAIN_DIGITS_PATH};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return RunProcess(argv);
}

TEST_CASE("Digits training on 4 ranks matches 1 rank with identical weights everywhere",
          "[tools][examples][multirank]") {
  Watchdog watchdog("train digits 1 vs 4 ranks", seconds(240));
  ProcessResult one = Train(1);
  INFO(one.err);
  REQUIRE(one.exit_code == 0);
  std::vector<FinalLine> single = ParseFinalLines(one.out);
  REQUIRE(single.size() == 1);
  CHECK(single[0].accuracy > 0.85);

  ProcessResult four = Train(4);
  INFO(four.err);
  REQUIRE(four.exit_code == 0);
  std::vector<FinalLine> ranks = ParseFinalLines(four.out);
  REQUIRE(ranks.size() == 4);
  for (const FinalLine& line : ranks) {
    INFO("rank " << line.rank);
    CHECK(line.checksum == ranks[0].checksum);
    CHECK(line.accuracy == ranks[0].accuracy);
  }
  CHECK(std::abs(ranks[0].accuracy - single[0].accuracy) <= 0.02);
}

TEST_CASE("Digits training refuses a batch that the ranks cannot split evenly",
          "[tools][examples][multirank]") {
  Watchdog watchdog("train digits uneven batch", seconds(120));
  ProcessResult run = Train(3, {"--batch-size", "64", "--epochs", "1"});
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("--batch-size 64 is not divisible by the 3 ranks") != std::string::npos);
}

}  // namespace
}  // namespace kolo::testing
