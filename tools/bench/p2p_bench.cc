#include "tools/bench/p2p_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/p2p.h"
#include "tools/bench/bench_stats.h"

namespace kolo::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWindow = 16;  // sends in flight in the bandwidth test, as osu_bw's default 64 / 4

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

TensorView View(std::vector<uint8_t>& bytes) {
  return {bytes.data(), DataType::kUInt8, {static_cast<int64_t>(bytes.size())}, Device::Cpu()};
}

// Rank 0's half round trips of `iters` ping-pongs (after `warmup`); rank 1 echoes. The echo is
// checked: rank 1 sends back what it received, so a byte lost or moved shows as wrong.
Status PingPong(int64_t bytes, int warmup, int iters, std::vector<double>* one_way,
                int64_t* wrong) {
  std::vector<uint8_t> out(bytes), in(bytes);
  for (int64_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(i * 7 + 3);
  for (int it = 0; it < warmup + iters; ++it) {
    if (kolo::rank() == 0) {
      const Clock::time_point start = Clock::now();
      KOLO_RETURN_IF_ERROR(kolo::send(View(out), 1, it));
      KOLO_RETURN_IF_ERROR(kolo::recv(View(in), 1, it).status());
      if (it >= warmup) one_way->push_back(Micros(Clock::now() - start) / 2);
      if (in != out) ++*wrong;
      std::fill(in.begin(), in.end(), 0);
    } else {
      KOLO_RETURN_IF_ERROR(kolo::recv(View(in), 0, it).status());
      KOLO_RETURN_IF_ERROR(kolo::send(View(in), 0, it));
    }
  }
  return Status::Ok();
}

// Rank 0 sends kWindow tensors at once, rank 1 receives them and replies with one byte; rank 0's
// GB/s per window (median over iterations).
Status Stream(int64_t bytes, int warmup, int iters, std::vector<double>* gbps) {
  std::vector<std::vector<uint8_t>> buffers(kWindow, std::vector<uint8_t>(bytes, 1));
  std::vector<uint8_t> ack(1);
  for (int it = 0; it < warmup + iters; ++it) {
    const Clock::time_point start = Clock::now();
    std::vector<Handle> handles;
    for (auto& buffer : buffers) {
      StatusOr<Handle> h = kolo::rank() == 0 ? kolo::send_async(View(buffer), 1, 1000 + it)
                                             : kolo::recv_async(View(buffer), 0, 1000 + it);
      KOLO_RETURN_IF_ERROR(h.status());
      handles.push_back(*h);
    }
    for (Handle& h : handles) KOLO_RETURN_IF_ERROR(h.Synchronize());
    if (kolo::rank() == 0) {
      KOLO_RETURN_IF_ERROR(kolo::recv(View(ack), 1, 2000 + it).status());
      const double seconds = Micros(Clock::now() - start) / 1e6;
      if (it >= warmup) gbps->push_back(static_cast<double>(bytes) * kWindow / seconds / 1e9);
    } else {
      KOLO_RETURN_IF_ERROR(kolo::send(View(ack), 0, 2000 + it));
    }
  }
  return Status::Ok();
}

}  // namespace

int RunPingPongBench(const BenchOptions& options) {
  if (kolo::size() < 2) {
    std::fprintf(stderr, "kolo-bench --pingpong: needs 2 ranks or more\n");
    return 1;
  }
  if (kolo::rank() == 0) {
    std::printf("# kolo-bench --pingpong: ranks 0 and 1 of %d, %d iterations after %d\n",
                kolo::size(), options.iters, options.warmup_iters);
    std::printf("# %10s %14s %12s %14s %7s\n", "size", "latency(us)", "lat GB/s", "stream GB/s",
                "#wrong");
  }
  int64_t wrong = 0;
  Status status;
  if (kolo::rank() <= 1) {
    for (int64_t bytes : SweepSizes(options)) {
      std::vector<double> one_way, gbps;
      status = PingPong(bytes, options.warmup_iters, options.iters, &one_way, &wrong);
      if (status.ok()) status = Stream(bytes, 1, std::max(3, options.iters / 4), &gbps);
      if (!status.ok()) break;
      if (kolo::rank() == 0) {
        const double latency = Median(one_way);
        std::printf("  %10lld %14.2f %12.3f %14.3f %7lld\n", static_cast<long long>(bytes), latency,
                    static_cast<double>(bytes) / latency / 1e3, Median(gbps),
                    static_cast<long long>(wrong));
        std::fflush(stdout);
      }
    }
  }
  if (!status.ok()) {
    std::fprintf(stderr, "kolo-bench: rank %d: %s\n", kolo::rank(), status.ToString().c_str());
  }
  Status waited = kolo::barrier();  // ranks beyond 1 wait here, not in shutdown()
  if (status.ok()) status = waited;
  return status.ok() && wrong == 0 ? 0 : 1;
}

}  // namespace kolo::bench
