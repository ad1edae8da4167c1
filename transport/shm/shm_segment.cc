#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>

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

}  // namespace

StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(const std::string& name, size_t bytes) {
  UniqueFd fd(shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoToStatus(errno, "creating shared memory " + name);
  // From here on the name exists: every failure path unlinks it.
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
  return std::unique_ptr<ShmSegment>(new ShmSegment(name, *data, bytes, /*owns_name=*/true));
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
  return std::unique_ptr<ShmSegment>(new ShmSegment(name, data, bytes, /*owns_name=*/false));
}

ShmSegment::ShmSegment(std::string name, uint8_t* data, size_t size, bool owns_name)
    : name_(std::move(name)), data_(data), size_(size), owns_name_(owns_name) {}

ShmSegment::~ShmSegment() {
  Unlink();
  munmap(data_, size_);
}

void ShmSegment::Unlink() {
  if (!owns_name_) return;
  owns_name_ = false;
  shm_unlink(name_.c_str());
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
