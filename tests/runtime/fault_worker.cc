// A rank of the fault tests (peer_loss_test.cc): joins the job from KOLO_* variables, runs
// allreduces until one fails, then reports how kolo behaved afterwards, one fact per line:
//   ready                      the first allreduce succeeded
//   FAILED <status>            the allreduce that failed, with kolo's message
//   LATER <ms> <status>        an enqueue after the failure, and how long it took
//   SHUTDOWN <ms> <status>     shutdown() and how long it took
// Exit codes: 3 after a failure (expected), 2 if init failed, 0 if no failure happened.
#include <chrono>
#include <cstdio>
#include <vector>

#include "kolo/kolo.h"

namespace {
double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}
}  // namespace

int main() {
  kolo::Status status = kolo::init();
  if (!status.ok()) {
    std::printf("INIT %s\n", status.ToString().c_str());
    return 2;
  }
  std::vector<float> grad(1 << 20, 1.0f);
  kolo::TensorView view{grad.data(),
                        kolo::DataType::kFloat32,
                        {static_cast<int64_t>(grad.size())},
                        kolo::Device::Cpu()};
  auto started = std::chrono::steady_clock::now();
  for (int step = 0; MsSince(started) < 60000; ++step) {
    status = kolo::allreduce("grad", view, view);
    if (!status.ok()) break;
    if (step == 0) {
      std::printf("ready\n");
      std::fflush(stdout);
    }
  }
  if (status.ok()) {
    (void)kolo::shutdown();
    return 0;
  }
  std::printf("FAILED %s\n", status.ToString().c_str());
  auto t0 = std::chrono::steady_clock::now();
  kolo::Status later = kolo::allreduce_async("later", view, view, {}, [](const kolo::Status&) {});
  std::printf("LATER %.1f %s\n", MsSince(t0), later.ToString().c_str());
  t0 = std::chrono::steady_clock::now();
  kolo::Status down = kolo::shutdown();
  std::printf("SHUTDOWN %.1f %s\n", MsSince(t0), down.ToString().c_str());
  std::fflush(stdout);
  return 3;
}
