#include "core/wakeup.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kolo {
namespace {

int MakeEventFd() {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) {
    std::fprintf(stderr, "kolo: eventfd() failed: %s\n", std::strerror(errno));
    std::abort();
  }
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
  // Resets the counter when this wait consumed a Notify, or when a Notify's write came after
  // an earlier wait had already consumed it (the eventfd then stays readable until read here).
  if (pending_.exchange(false) || (polled[0].revents & POLLIN) != 0) {
    uint64_t count = 0;
    // EAGAIN when the Notify that set pending_ has not written yet: harmless, see above.
    [[maybe_unused]] ssize_t got = read(event_fd_, &count, sizeof(count));
  }
}

}  // namespace kolo
