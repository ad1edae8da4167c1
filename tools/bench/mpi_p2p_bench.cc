// mpi_p2p_bench: Open MPI's (or MPICH's) MPI_Send/MPI_Recv timed as kolo-bench --pingpong times
// kolo's point-to-point (tools/bench/p2p_bench.h): per size, the one-way latency (half a send
// and its echo, median over iterations; the echo is checked) and the streaming bandwidth (16
// MPI_Isend in flight, then a one-byte reply; median), between ranks 0 and 1. The peer for
// docs/P2P.md's figures. Not built by CMake (it needs mpicxx):
//
//   mpicxx -std=c++17 -O2 -o build/mpi_p2p_bench tools/bench/mpi_p2p_bench.cc
//   mpirun --allow-run-as-root -np 2 build/mpi_p2p_bench 4 64M 4 200
//                                                      min max factor iterations
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWindow = 16;

size_t BytesOf(const std::string& text) {
  const char unit = text.empty() ? ' ' : text.back();
  const size_t value = std::strtoull(text.c_str(), nullptr, 10);
  if (unit == 'K' || unit == 'k') return value << 10;
  if (unit == 'M' || unit == 'm') return value << 20;
  if (unit == 'G' || unit == 'g') return value << 30;
  return value;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// Rank 0's half round trips of `iters` ping-pongs after `warmup`; rank 1 echoes. Counts wrong
// echoes into `wrong`.
std::vector<double> PingPong(int rank, size_t bytes, int warmup, int iters, long long* wrong) {
  std::vector<unsigned char> out(bytes), in(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(i * 7 + 3);
  const int n = static_cast<int>(bytes);
  std::vector<double> one_way;
  for (int it = 0; it < warmup + iters; ++it) {
    if (rank == 0) {
      const Clock::time_point start = Clock::now();
      MPI_Send(out.data(), n, MPI_BYTE, 1, it, MPI_COMM_WORLD);
      MPI_Recv(in.data(), n, MPI_BYTE, 1, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (it >= warmup) one_way.push_back(Micros(Clock::now() - start) / 2);
      if (in != out) ++*wrong;
      std::fill(in.begin(), in.end(), 0);
    } else {
      MPI_Recv(in.data(), n, MPI_BYTE, 0, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(in.data(), n, MPI_BYTE, 0, it, MPI_COMM_WORLD);
    }
  }
  return one_way;
}

// Rank 0's GB/s of windows of kWindow sends in flight, each followed by a one-byte reply.
std::vector<double> Stream(int rank, size_t bytes, int iters) {
  std::vector<std::vector<unsigned char>> window(kWindow, std::vector<unsigned char>(bytes));
  const int n = static_cast<int>(bytes);
  unsigned char ack = 0;
  std::vector<double> gbps;
  for (int it = 0; it < 1 + iters; ++it) {
    const Clock::time_point start = Clock::now();
    std::vector<MPI_Request> requests(kWindow);
    for (int w = 0; w < kWindow; ++w) {
      if (rank == 0) {
        MPI_Isend(window[w].data(), n, MPI_BYTE, 1, 1000, MPI_COMM_WORLD, &requests[w]);
      } else {
        MPI_Irecv(window[w].data(), n, MPI_BYTE, 0, 1000, MPI_COMM_WORLD, &requests[w]);
      }
    }
    MPI_Waitall(kWindow, requests.data(), MPI_STATUSES_IGNORE);
    if (rank == 0) {
      MPI_Recv(&ack, 1, MPI_BYTE, 1, 2000, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double seconds = Micros(Clock::now() - start) / 1e6;
      if (it >= 1) gbps.push_back(static_cast<double>(bytes) * kWindow / seconds / 1e9);
    } else {
      MPI_Send(&ack, 1, MPI_BYTE, 0, 2000, MPI_COMM_WORLD);
    }
  }
  return gbps;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const size_t min_bytes = argc > 1 ? BytesOf(argv[1]) : 4;
  const size_t max_bytes = argc > 2 ? BytesOf(argv[2]) : size_t{64} << 20;
  const size_t factor = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 4;
  const int iters = argc > 4 ? std::atoi(argv[4]) : 200;
  if (rank == 0) {
    std::printf("# mpi_p2p_bench: ranks 0 and 1, %d iterations after 20\n", iters);
    std::printf("# %10s %14s %12s %14s %7s\n", "size", "latency(us)", "lat GB/s", "stream GB/s",
                "#wrong");
  }
  long long wrong = 0;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    std::vector<double> one_way, gbps;
    if (rank <= 1) {
      one_way = PingPong(rank, bytes, 20, iters, &wrong);
      gbps = Stream(rank, bytes, std::max(3, iters / 4));
    }
    if (rank == 0) {
      const double latency = Median(one_way);
      std::printf("  %10zu %14.2f %12.3f %14.3f %7lld\n", bytes, latency,
                  static_cast<double>(bytes) / latency / 1e3, Median(gbps), wrong);
      std::fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
