// kolo-cross-memory-bench: the mechanism under shared-memory single copy, alone
// (docs/PERFORMANCE.md, "Single copy"). A forked peer process dirties a buffer (as a fresh
// gradient would be) before every pass; this process then copies it piece by piece three ways:
// memcpy from a shared mapping (what the slot path's copies do), process_vm_readv from the
// peer's private buffer and process_vm_writev into it (transport/peer_memory.h, what single
// copy does), each into or out of a piece-sized scratch that stays in cache. Modes alternate
// pass by pass; the table gives medians of CPU time (this thread's, kernel included, so other
// load on the machine counts less) and of wall time.
//
//   kolo-cross-memory-bench [MiB per pass, default 16] [passes, default 9]
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "transport/peer_memory.h"

namespace {

double Seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const char* const kModes[] = {"memcpy from shared memory", "process_vm_readv", "process_vm_writev"};

// By (mode, piece): the seconds of each pass.
using Times = std::map<std::pair<int, size_t>, std::vector<double>>;

// One pass of `mode` over `total` bytes in pieces of `piece`; false (with a message) when a copy
// failed.
bool CopyPass(int mode, pid_t peer, const uint8_t* shared, uint8_t* private_buffer, size_t total,
              size_t piece, std::vector<uint8_t>* scratch) {
  for (size_t at = 0; at < total; at += piece) {
    const size_t n = std::min(piece, total - at);
    const std::vector<kolo::PeerRange> range = {
        {reinterpret_cast<uint64_t>(private_buffer + at), n}};
    int err = 0;
    if (mode == 0) {
      std::memcpy(scratch->data(), shared + at, n);
    } else if (mode == 1) {
      err = kolo::transport::ReadProcessMemory(peer, range, scratch->data());
    } else {
      err = kolo::transport::WriteProcessMemory(peer, scratch->data(), range);
    }
    if (err != 0) {
      std::fprintf(stderr, "%s: %s\n", kModes[mode],
                   kolo::transport::ProcessMemoryErrorText(err).c_str());
      return false;
    }
  }
  return true;
}

void PrintTable(size_t total, int passes, const std::vector<size_t>& pieces, Times& cpu,
                Times& wall) {
  std::printf("%zu MiB per pass, %d passes; GB/s by median CPU time (by median wall time)\n\n",
              total >> 20, passes);
  std::printf("| piece | %s | %s | %s |\n|---:|---:|---:|---:|\n", kModes[0], kModes[1], kModes[2]);
  for (size_t piece : pieces) {
    std::printf("| %zu KiB |", piece >> 10);
    for (int mode = 0; mode < 3; ++mode) {
      std::printf(" %.2f (%.2f) |", static_cast<double>(total) / Median(cpu[{mode, piece}]) / 1e9,
                  static_cast<double>(total) / Median(wall[{mode, piece}]) / 1e9);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t total = static_cast<size_t>(argc > 1 ? std::atol(argv[1]) : 16) << 20;
  const int passes = argc > 2 ? std::atoi(argv[2]) : 9;
  if (total == 0 || passes <= 0) {
    std::fprintf(stderr, "usage: kolo-cross-memory-bench [MiB per pass] [passes]\n");
    return 2;
  }
  int to_peer[2], from_peer[2];
  if (pipe(to_peer) != 0 || pipe(from_peer) != 0) return 1;
  auto* shared = static_cast<uint8_t*>(mmap(nullptr, total, PROT_READ | PROT_WRITE,
                                            MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
  auto* private_buffer = static_cast<uint8_t*>(std::aligned_alloc(4096, total));
  if (shared == MAP_FAILED || private_buffer == nullptr) return 1;
  const pid_t peer = fork();
  if (peer < 0) return 1;
  if (peer == 0) {  // the peer: dirty both buffers on request, until told to stop
    char c = 0;
    while (read(to_peer[0], &c, 1) == 1 && c != 'q') {
      std::memset(private_buffer, c, total);
      std::memset(shared, c, total);
      if (write(from_peer[1], &c, 1) != 1) break;
    }
    _exit(0);
  }
  const std::vector<size_t> pieces = {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20};
  std::vector<uint8_t> scratch(pieces.back(), 0);
  Times cpu, wall;
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t piece : pieces) {
      for (int mode = 0; mode < 3; ++mode) {
        char c = static_cast<char>('a' + pass % 20);
        if (write(to_peer[1], &c, 1) != 1 || read(from_peer[0], &c, 1) != 1) return 1;
        const double cpu0 = Seconds(CLOCK_THREAD_CPUTIME_ID), wall0 = Seconds(CLOCK_MONOTONIC);
        if (!CopyPass(mode, peer, shared, private_buffer, total, piece, &scratch)) return 1;
        cpu[{mode, piece}].push_back(Seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0);
        wall[{mode, piece}].push_back(Seconds(CLOCK_MONOTONIC) - wall0);
      }
    }
  }
  const char quit = 'q';
  if (write(to_peer[1], &quit, 1) != 1) kill(peer, SIGKILL);
  waitpid(peer, nullptr, 0);
  PrintTable(total, passes, pieces, cpu, wall);
  return 0;
}
