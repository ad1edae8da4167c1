#include "transport/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>
#include <thread>

#include "core/errno_status.h"
#include "transport/unique_fd.h"

namespace kolo::transport {
namespace {

StatusOr<uint8_t*> Map(int fd, size_t bytes, const std::string& name) {
  // MAP_POPULATE: every page is faulted in now, none during an op.
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (data == MAP_FAILED) return ErrnoToStatus(errno, "mapping shared memory " + name);
  return static_cast<uint8_t*>(data);
}

// Whether `entry` (a /dev/shm file name) is "kolo-<pid>-<16 hex digits>", as FreshShmName
// makes them; sets *pid.
bool ParseSegmentName(const std::string& entry, pid_t* pid) {
  const std::string prefix = "kolo-";
  if (entry.rfind(prefix, 0) != 0) return false;
  size_t i = prefix.size();
  long long value = 0;
  const size_t digits_start = i;
  while (i < entry.size() && entry[i] >= '0' && entry[i] <= '9' && i - digits_start < 10) {
    value = value * 10 + (entry[i] - '0');
    ++i;
  }
  if (i == digits_start || i >= entry.size() || entry[i] != '-') return false;
  const std::string hex = entry.substr(i + 1);
  if (hex.size() != 16) return false;
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  if (value <= 0 || value > INT32_MAX) return false;
  *pid = static_cast<pid_t>(value);
  return true;
}

// Whether process `pid` exists in this process's view (EPERM: it exists, another user's).
bool ProcessExists(pid_t pid) {
  return kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace

StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(const std::string& name, size_t bytes) {
  UniqueFd fd(shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoToStatus(errno, "creating shared memory " + name);
  // The creator's lock: held until Unlink, dropped by the kernel if this process dies. A
  // sweeper that inspects the name right now holds it for a moment: the caller retries
  // under a fresh name. One that got it and removed the name leaves an unlinked object.
  struct stat st {};
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0 || fstat(fd.get(), &st) != 0 || st.st_nlink == 0) {
    return Unavailable("shared memory " + name +
                       " was inspected by another job's sweep while being created; try again");
  }
  // From here on the name exists and is ours: every failure path unlinks it.
  int err = posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
  if (err != 0) {
    shm_unlink(name.c_str());
    return ErrnoToStatus(err, "reserving " + std::to_string(bytes) + " bytes of shared memory " +
                                  name + " (is /dev/shm large enough?)");
  }
  StatusOr<uint8_t*> data = Map(fd.get(), bytes, name);
  if (!data.ok()) {
    shm_unlink(name.c_str());
    return data.status();
  }
  return std::unique_ptr<ShmSegment>(new ShmSegment(name, *data, bytes, fd.Release()));
}

StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(const std::string& name, size_t bytes) {
  UniqueFd fd(shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoToStatus(errno, "opening shared memory " + name);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoToStatus(errno, "fstat of shared memory " + name);
  if (static_cast<size_t>(st.st_size) != bytes) {
    return Internal("shared memory " + name + " has " + std::to_string(st.st_size) +
                    " bytes, expected " + std::to_string(bytes));
  }
  KOLO_ASSIGN_OR_RETURN(uint8_t * data, Map(fd.get(), bytes, name));
  return std::unique_ptr<ShmSegment>(new ShmSegment(name, data, bytes, /*lock_fd=*/-1));
}

ShmSegment::ShmSegment(std::string name, uint8_t* data, size_t size, int lock_fd)
    : name_(std::move(name)), data_(data), size_(size), lock_fd_(lock_fd) {}

ShmSegment::~ShmSegment() {
  Unlink();
  munmap(data_, size_);
}

void ShmSegment::Unlink() {
  if (lock_fd_ < 0) return;
  shm_unlink(name_.c_str());  // first: a linked name is never seen with its lock free
  close(lock_fd_);
  lock_fd_ = -1;
}

bool ShmSegment::RemoveIfAbandoned(const std::string& name, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    UniqueFd fd(shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0));
    if (!fd.valid()) return false;  // gone (its creator unlinked it), or another user's
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      struct stat st {};
      // Still linked, and no creator holds it: nobody else will remove it.
      if (fstat(fd.get(), &st) != 0 || st.st_nlink == 0) return false;
      return shm_unlink(name.c_str()) == 0;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // A creator that is dying drops its lock a moment after its sockets close.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<std::string> ShmSegment::RemoveStaleSegments() {
  std::vector<std::string> candidates;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return {};
  while (const dirent* entry = readdir(dir)) {
    pid_t pid = 0;
    // A creator that still exists holds its lock anyway; skipping it spares the open.
    if (ParseSegmentName(entry->d_name, &pid) && !ProcessExists(pid)) {
      candidates.push_back(std::string("/") + entry->d_name);
    }
  }
  closedir(dir);
  std::vector<std::string> removed;
  for (const std::string& name : candidates) {
    if (RemoveIfAbandoned(name, std::chrono::milliseconds(0))) removed.push_back(name);
  }
  return removed;
}

std::string FreshShmName() {
  std::random_device device;  // /dev/urandom: unpredictable across jobs and generations
  const uint64_t nonce = (static_cast<uint64_t>(device()) << 32) ^ device();
  char name[64];
  std::snprintf(name, sizeof(name), "/kolo-%d-%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(nonce));
  return name;
}

}  // namespace kolo::transport
