// Tests of transport/peer_memory.h: cross-memory attach within this process (many ranges,
// more than one system call takes, empty ones) and into a real second process (fork), and the
// errors: a process that is gone, an address that is not mapped.
#include "transport/peer_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "tests/support/cross_memory_attach.h"

namespace kolo::transport {
namespace {

uint64_t Address(const void* p) {
  return reinterpret_cast<uint64_t>(p);
}

TEST_CASE("cross-memory attach copies scattered ranges of this process, however many",
          "[transport][shm][unit]") {
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  std::vector<uint8_t> source(12000);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7 + 3);
  // 3000 ranges (three system calls' worth: IOV_MAX is 1024), every fourth byte, some empty.
  std::vector<PeerRange> ranges;
  std::vector<uint8_t> expected;
  for (size_t i = 0; i < source.size(); i += 4) {
    const size_t bytes = i % 40 == 0 ? 0 : 1 + i % 3;
    ranges.push_back({Address(&source[i]), bytes});
    expected.insert(expected.end(), source.begin() + i, source.begin() + i + bytes);
  }
  std::vector<uint8_t> gathered(expected.size(), 0);
  REQUIRE(ReadProcessMemory(getpid(), ranges, gathered.data()) == 0);
  CHECK(gathered == expected);

  std::vector<uint8_t> target(source.size(), 0);
  for (PeerRange& range : ranges) range.address += Address(target.data()) - Address(source.data());
  REQUIRE(WriteProcessMemory(getpid(), expected.data(), ranges) == 0);
  for (size_t i = 0; i < source.size(); i += 4) {
    const size_t bytes = i % 40 == 0 ? 0 : 1 + i % 3;
    for (size_t j = 0; j < 4; ++j) {
      INFO("byte " << i + j);
      CHECK(target[i + j] == (j < bytes ? source[i + j] : 0));
    }
  }
  CHECK(ReadProcessMemory(getpid(), {}, nullptr) == 0);  // nothing to copy
}

TEST_CASE("cross-memory attach reads and writes another process, and says when it is gone",
          "[transport][shm][unit]") {
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  // The child's copy of `buffer` has the same address as ours (fork), other contents.
  std::vector<uint8_t> buffer(1 << 20, 0x11);
  int to_child[2], from_child[2];
  REQUIRE(pipe(to_child) == 0);
  REQUIRE(pipe(from_child) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (uint8_t& b : buffer) b = 0x22;
    char c = 'r';
    if (write(from_child[1], &c, 1) != 1 || read(to_child[0], &c, 1) != 1) _exit(2);
    for (uint8_t b : buffer) {
      if (b != 0x33) _exit(1);  // the parent's write did not land
    }
    _exit(0);
  }
  char c = 0;
  REQUIRE(read(from_child[0], &c, 1) == 1);
  const std::vector<PeerRange> whole = {{Address(buffer.data()), buffer.size()}};
  std::vector<uint8_t> seen(buffer.size(), 0);
  CHECK(ReadProcessMemory(child, whole, seen.data()) == 0);
  CHECK(seen == std::vector<uint8_t>(buffer.size(), 0x22));
  CHECK(buffer == std::vector<uint8_t>(buffer.size(), 0x11));  // ours is untouched
  const std::vector<uint8_t> written(buffer.size(), 0x33);
  CHECK(WriteProcessMemory(child, written.data(), whole) == 0);
  REQUIRE(write(to_child[1], &c, 1) == 1);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);

  // Reaped: its process id names nobody (until the kernel hands it out again, long after).
  CHECK(ReadProcessMemory(child, whole, seen.data()) == ESRCH);
  CHECK(WriteProcessMemory(child, written.data(), whole) == ESRCH);
  CHECK_THAT(ProcessMemoryErrorText(ESRCH),
             Catch::StartsWith("its process is gone (") && Catch::Contains("ESRCH"));
}

TEST_CASE("cross-memory attach reports an address that is not mapped", "[transport][shm][unit]") {
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  const long page = sysconf(_SC_PAGESIZE);
  void* mapped =
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mapped != MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(mapped);
  REQUIRE(munmap(bytes + page, page) == 0);
  // The first range is readable, the second crosses into the hole: the copy stops there.
  std::vector<uint8_t> local(3 * page);
  const std::vector<PeerRange> ranges = {{Address(bytes), static_cast<size_t>(page)},
                                         {Address(bytes + page / 2), static_cast<size_t>(page)}};
  CHECK(ReadProcessMemory(getpid(), ranges, local.data()) == EFAULT);
  CHECK(WriteProcessMemory(getpid(), local.data(), ranges) == EFAULT);
  CHECK_THAT(ProcessMemoryErrorText(EFAULT), Catch::Contains("not mapped"));
  CHECK_THAT(ProcessMemoryErrorText(EPERM), Catch::Contains("not permitted"));
  munmap(bytes, page);
}

}  // namespace
}  // namespace kolo::transport
