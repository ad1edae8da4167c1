// mpi_alltoall_bench: Open MPI's MPI_Alltoall timed as kolo-bench times kolo's alltoall
// (-o alltoall --barrier 1 --stat median): per size (the bytes each rank sends in all, float32,
// even splits), an untimed barrier, then one alltoall; the median over iterations of the
// slowest rank's time. The peer for docs/PERFORMANCE.md's alltoall figures. Not built by CMake
// (it needs mpicxx):
//
//   mpicxx -std=c++17 -O2 -o build/mpi_alltoall_bench tools/bench/mpi_alltoall_bench.cc
//   mpirun --allow-run-as-root -np 4 build/mpi_alltoall_bench 4K 64K 1M 16M
//
// Every iteration's output is checked element by element (#wrong).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

size_t BytesOf(const std::string& text) {
  const char unit = text.empty() ? ' ' : text.back();
  const size_t value = std::strtoull(text.c_str(), nullptr, 10);
  if (unit == 'K' || unit == 'k') return value << 10;
  if (unit == 'M' || unit == 'm') return value << 20;
  if (unit == 'G' || unit == 'g') return value << 30;
  return value;
}

float ValueOf(int from, int to, size_t i) {
  return static_cast<float>((from * 7 + to * 3 + static_cast<int>(i % 1000)) % 1009);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iterations = 20, warmup = 3;
  if (rank == 0) {
    std::printf(
        "# MPI_Alltoall, float32, %d ranks, even splits; median over %d iterations "
        "(after %d) of the slowest rank's us, an untimed barrier before each\n",
        size, iterations, warmup);
    std::printf("%12s %12s %12s %8s\n", "bytes", "per peer", "time us", "#wrong");
  }
  for (int a = 1; a < argc; ++a) {
    const size_t count = BytesOf(argv[a]) / sizeof(float) / static_cast<size_t>(size);
    std::vector<float> in(count * static_cast<size_t>(size)), out(in.size());
    for (int to = 0; to < size; ++to) {
      for (size_t i = 0; i < count; ++i) in[to * count + i] = ValueOf(rank, to, i);
    }
    std::vector<double> slowest;
    long wrong = 0;
    for (int it = 0; it < warmup + iterations; ++it) {
      std::fill(out.begin(), out.end(), -1.0f);
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      MPI_Alltoall(in.data(), static_cast<int>(count), MPI_FLOAT, out.data(),
                   static_cast<int>(count), MPI_FLOAT, MPI_COMM_WORLD);
      double took = (MPI_Wtime() - start) * 1e6, max = 0;
      MPI_Reduce(&took, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      for (int from = 0; from < size; ++from) {
        for (size_t i = 0; i < count; ++i) wrong += out[from * count + i] != ValueOf(from, rank, i);
      }
      if (it >= warmup) slowest.push_back(max);
    }
    long wrong_all = 0;
    MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      std::sort(slowest.begin(), slowest.end());
      std::printf("%12zu %12zu %12.1f %8ld\n", count * sizeof(float) * size, count * sizeof(float),
                  slowest[slowest.size() / 2], wrong_all);
    }
  }
  MPI_Finalize();
  return 0;
}
