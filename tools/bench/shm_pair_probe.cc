// kolo-shm-pair-probe: the shared-memory allgather step of two ranks done by hand, without kolo,
// to tell a slow machine from a slow kolo (docs/TORCH-DISTRIBUTED.md, "Slow launches").
// Two processes (this one and a forked child), each bound to a CPU of its own (the first two
// this process may run on), share a mapping of two slots; per pass each copies its block into
// its slot, meets the other at a spinning barrier, copies the other's block out of its slot and
// meets it again. Prints the median pass over the timed passes in µs, as kolo-bench's
// `-o allgather` times the same bytes (an allgather of 2 x BLOCK).
//
//   kolo-shm-pair-probe [KiB per block, default 512] [passes, default 200]
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace {

// The first two CPUs this process may run on, or -1s.
void FirstTwoCpus(int* first, int* second) {
  *first = *second = -1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    if (*first < 0) {
      *first = cpu;
    } else {
      *second = cpu;
      return;
    }
  }
}

void BindTo(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

// Both processes arrive: each adds one, then waits for the pair's count of this meeting.
void Meet(std::atomic<int>* count, int* meetings) {
  *meetings += 2;
  count->fetch_add(1);
  while (count->load() < *meetings) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t block = (argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 512) * 1024;
  const int passes = argc > 2 ? std::atoi(argv[2]) : 200;
  if (block == 0 || passes <= 0) {
    std::fprintf(stderr, "usage: kolo-shm-pair-probe [KiB per block] [passes]\n");
    return 2;
  }
  const size_t bytes = 2 * block + 64;
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    std::perror("kolo-shm-pair-probe: mmap");
    return 1;
  }
  auto* slots = static_cast<unsigned char*>(shared);
  auto* count = new (slots + 2 * block) std::atomic<int>(0);
  int first = -1, second = -1;
  FirstTwoCpus(&first, &second);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("kolo-shm-pair-probe: fork");
    return 1;
  }
  const int me = child == 0 ? 1 : 0;
  BindTo(me == 0 ? first : second);
  std::vector<unsigned char> mine(block, static_cast<unsigned char>(me + 1)), theirs(block, 0);
  std::vector<double> micros;
  int meetings = 0;
  for (int pass = 0; pass < passes + 10; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(slots + me * block, mine.data(), block);
    Meet(count, &meetings);
    std::memcpy(theirs.data(), slots + (1 - me) * block, block);
    Meet(count, &meetings);
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    if (pass >= 10) micros.push_back(took.count());  // the first 10 warm up
  }
  if (theirs[0] != static_cast<unsigned char>(2 - me)) {
    std::fprintf(stderr, "kolo-shm-pair-probe: rank %d read the wrong bytes\n", me);
    return 1;
  }
  if (me == 1) return 0;
  int status = 0;
  waitpid(child, &status, 0);
  std::nth_element(micros.begin(), micros.begin() + micros.size() / 2, micros.end());
  std::printf("%zu KiB blocks, CPUs %d and %d, median of %d passes: %.1f us\n", block / 1024, first,
              second, passes, micros[micros.size() / 2]);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
