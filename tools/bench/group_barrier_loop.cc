// A repeated barrier and a repeated grouped allreduce of two 4 KiB float tensors through the
// public API: prints rank 0's median, p10 and p90 per call over ITERS calls (after 100 warm-up
// calls); docs/FAST-PATH.md, "Measured". Built as kolo-group-bench (kolo-bench has no barrier
// or group mode): `build/bin/kolorun -np 2 build/bin/kolo-group-bench 1000`. To time an older
// build with this source, compile it against that build's libkolo.so:
//   g++ -std=c++17 -O2 -Iruntime/include -Icore/include -Ibuild/core/include
//     tools/bench/group_barrier_loop.cc -Lbuild/lib -lkolo -Wl,-rpath,$PWD/build/lib -o loop
//   (one command line)
//   build/bin/kolorun -np 2 ./loop 1000
// Single-threaded; one process per rank.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kolo/kolo.h"

namespace {
using Clock = std::chrono::steady_clock;

template <typename Fn>
void Time(const char* what, int iters, Fn fn) {
  std::vector<double> us;
  for (int i = 0; i < iters + 100; ++i) {
    const auto start = Clock::now();
    kolo::Status s = fn();
    const double t = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (!s.ok()) {
      std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
      std::exit(1);
    }
    if (i >= 100) us.push_back(t);
  }
  std::sort(us.begin(), us.end());
  if (kolo::rank() == 0) {
    std::printf("%-28s median %8.1f us  p10 %8.1f  p90 %8.1f  (%d calls)\n", what,
                us[us.size() / 2], us[us.size() / 10], us[us.size() * 9 / 10], iters);
  }
}
}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (!kolo::init().ok()) return 1;
  std::vector<float> a(1024, 1.0f), b(1024, 2.0f);
  const std::vector<kolo::TensorView> views = {
      {a.data(), kolo::DataType::kFloat32, {1024}, kolo::Device::Cpu()},
      {b.data(), kolo::DataType::kFloat32, {1024}, kolo::Device::Cpu()}};
  Time("barrier", iters, [] { return kolo::barrier(); });
  Time("grouped_allreduce 2x4KiB", iters, [&] {
    return kolo::grouped_allreduce({"g/a", "g/b"}, views, views);
  });
  return kolo::shutdown().ok() ? 0 : 1;
}
