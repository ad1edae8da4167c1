#include "core/wakeup.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace kolo {
namespace {

int MakeEventFd() {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  KOLO_CHECK(fd >= 0) << "eventfd() failed: " << std::strerror(errno);
  return fd;
}

}  // namespace

Wakeup::Wakeup() : event_fd_(MakeEventFd()) {}

Wakeup::~Wakeup() {
  close(event_fd_);
}

void Wakeup::Notify() {
  if (pending_.exchange(true)) return;
  const uint64_t one = 1;
  // Cannot fail: the counter is far from overflow and the fd is open for our lifetime.
  [[maybe_unused]] ssize_t written = write(event_fd_, &one, sizeof(one));
}

void Wakeup::WaitUntil(std::chrono::steady_clock::time_point deadline,
                       const std::vector<int>& fds) {
  std::vector<pollfd> polled;
  polled.reserve(fds.size() + 1);
  polled.push_back({event_fd_, POLLIN, 0});
  for (int fd : fds) polled.push_back({fd, POLLIN, 0});
  for (;;) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec timeout{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    const int ready = ppoll(polled.data(), polled.size(), &timeout, nullptr);
    if (ready < 0 && errno == EINTR) continue;
    break;  // ready, timed out, or an error no retry would fix
  }
  // Drain, then clear. A Notify between the two finds pending_ set and skips its write, which
  // is fine: it queued its work before notifying, and the caller looks after this returns. A
  // Notify after the clear writes, so the next wait returns at once. (Clearing first would
  // let a Notify in between write, have that write drained here and leave pending_ set over
  // an empty eventfd: every later Notify would skip its write and the next wait would sleep.)
  if (pending_.load() || (polled[0].revents & POLLIN) != 0) {
    uint64_t count = 0;
    // EAGAIN when a Notify has set pending_ but not written yet: its write then leaves the
    // eventfd readable and the next wait returns at once, harmlessly.
    [[maybe_unused]] ssize_t got = read(event_fd_, &count, sizeof(count));
  }
  pending_.store(false);
}

}  // namespace kolo
