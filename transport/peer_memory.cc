#include "transport/peer_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <climits>
#include <cstdint>

#include "core/errno_status.h"

namespace kolo::transport {
namespace {

// The kernel takes at most IOV_MAX remote ranges per call.
constexpr size_t kMaxRanges = IOV_MAX;

// Copies between `local` and `ranges` of `pid`'s memory, continuing after short counts (the
// kernel stops at the first range it cannot copy; the next call then reports why).
template <typename Call>
int Transfer(const std::vector<PeerRange>& ranges, uint8_t* local, Call call) {
  size_t index = 0;   // first range not wholly copied
  size_t offset = 0;  // bytes of it already copied
  iovec remote[kMaxRanges];
  while (index < ranges.size()) {
    size_t count = 0;
    size_t bytes = 0;
    for (size_t i = index; i < ranges.size() && count < kMaxRanges; ++i, ++count) {
      const size_t skip = i == index ? offset : 0;
      remote[count].iov_base = reinterpret_cast<void*>(ranges[i].address + skip);
      remote[count].iov_len = ranges[i].bytes - skip;
      bytes += ranges[i].bytes - skip;
    }
    if (bytes == 0) {  // only empty ranges left
      index += count;
      offset = 0;
      continue;
    }
    iovec here{local, bytes};
    const ssize_t moved = call(&here, remote, count);
    if (moved < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (moved == 0) return EIO;  // no progress and no error: should not happen
    local += moved;
    size_t left = static_cast<size_t>(moved);
    while (left > 0) {
      const size_t in_range = ranges[index].bytes - offset;
      if (left < in_range) {
        offset += left;
        break;
      }
      left -= in_range;
      ++index;
      offset = 0;
    }
  }
  return 0;
}

}  // namespace

int ReadProcessMemory(pid_t pid, const std::vector<PeerRange>& ranges, void* local) {
  return Transfer(ranges, static_cast<uint8_t*>(local),
                  [pid](const iovec* here, const iovec* remote, size_t count) {
                    return process_vm_readv(pid, here, 1, remote, count, 0);
                  });
}

int WriteProcessMemory(pid_t pid, const void* local, const std::vector<PeerRange>& ranges) {
  return Transfer(ranges, static_cast<uint8_t*>(const_cast<void*>(local)),
                  [pid](const iovec* here, const iovec* remote, size_t count) {
                    return process_vm_writev(pid, here, 1, remote, count, 0);
                  });
}

std::string ProcessMemoryErrorText(int err) {
  switch (err) {
    case ESRCH:
      return "its process is gone (" + ErrnoText(err) + ")";
    case EFAULT:
      return "an address is not mapped there (" + ErrnoText(err) + ")";
    case EPERM:
      return "not permitted (" + ErrnoText(err) +
             "; another user, Yama's ptrace_scope or a seccomp filter)";
    case ENOSYS:
      return "this kernel has no cross-memory attach (" + ErrnoText(err) + ")";
    default:
      return ErrnoText(err);
  }
}

}  // namespace kolo::transport
