// One rank of control_relay_job_test.cc: joins with its environment's KOLO_* settings, runs
// allreduces of several sizes (two of them repeated, so that the cached path runs too), a
// grouped allreduce and barriers, checks every result, and prints "RESULT ok" or "RESULT <what
// failed>", then "SHUTDOWN <status>". Exit code 0 when every op agreed, 1 otherwise, 2 when
// init() failed ("INIT <status>").
#include <cstdio>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "worker_lines.h"

namespace {

using kolo::test::Print;
using kolo::test::View;

// Every rank contributes rank + 1 + i at element i: the sum is n(n+1)/2 + n*i.
std::string CheckedAllreduce(const std::string& name, size_t count) {
  const int n = kolo::size();
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(kolo::rank() + 1 + i % 7);
  kolo::Status status = kolo::allreduce(name, View(data), View(data));
  if (!status.ok()) return name + ": " + status.ToString();
  for (size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7));
    if (data[i] != want) {
      return name + ": element " + std::to_string(i) + " is " + std::to_string(data[i]) + ", not " +
             std::to_string(want);
    }
  }
  return "";
}

std::string CheckedGroup() {
  const int n = kolo::size();
  std::vector<std::vector<float>> data = {std::vector<float>(5, 1.0f),
                                          std::vector<float>(3000, 2.0f)};
  std::vector<kolo::TensorView> views = {View(data[0]), View(data[1])};
  kolo::Status status = kolo::grouped_allreduce({"group/a", "group/b"}, views, views);
  if (!status.ok()) return "grouped allreduce: " + status.ToString();
  if (data[0][4] != static_cast<float>(n) || data[1][2999] != static_cast<float>(2 * n)) {
    return "grouped allreduce: wrong sums";
  }
  return "";
}

std::string RunSteps() {
  for (int step = 0; step < 3; ++step) {
    for (const auto& [name, count] : std::vector<std::pair<std::string, size_t>>{
             {"small", 1}, {"mid", 1000}, {"big", 100000}}) {
      std::string failed = CheckedAllreduce(name, count);
      if (!failed.empty()) return failed;
    }
    std::string failed = CheckedGroup();
    if (!failed.empty()) return failed;
    kolo::Status barrier = kolo::barrier();
    if (!barrier.ok()) return "barrier: " + barrier.ToString();
  }
  return "";
}

}  // namespace

int main() {
  kolo::Status status = kolo::init();
  if (!status.ok()) {
    Print("INIT " + status.ToString());
    return 2;
  }
  const std::string failed = RunSteps();
  Print("RESULT " + (failed.empty() ? std::string("ok") : failed));
  kolo::Status down = kolo::shutdown();
  Print("SHUTDOWN " + down.ToString());
  return failed.empty() && down.ok() ? 0 : 1;
}
