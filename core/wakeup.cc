#include "core/wakeup.h"

#include <sys/epoll.h>
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

int MakeEpoll() {
  const int fd = epoll_create1(EPOLL_CLOEXEC);
  KOLO_CHECK(fd >= 0) << "epoll_create1() failed: " << std::strerror(errno);
  return fd;
}

// Level-triggered interest in `fd` becoming readable (or closed).
void Add(int epoll_fd, int fd) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  const int added = epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event);
  KOLO_CHECK(added == 0 || errno == EEXIST) << "epoll_ctl(ADD) failed: " << std::strerror(errno);
}

void Remove(int epoll_fd, int fd) {
  // ENOENT: not there; EBADF: closed already, which removed it.
  const int removed = epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  KOLO_CHECK(removed == 0 || errno == ENOENT || errno == EBADF)
      << "epoll_ctl(DEL) failed: " << std::strerror(errno);
}

}  // namespace

Wakeup::Wakeup() : event_fd_(MakeEventFd()), epoll_fd_(MakeEpoll()), fds_epoll_fd_(MakeEpoll()) {
  Add(epoll_fd_, event_fd_);
  Add(epoll_fd_, fds_epoll_fd_);
}

Wakeup::~Wakeup() {
  close(fds_epoll_fd_);
  close(epoll_fd_);
  close(event_fd_);
}

void Wakeup::Notify() {
  if (pending_.exchange(true)) return;
  const uint64_t one = 1;
  // Cannot fail: the counter is far from overflow and the fd is open for our lifetime.
  [[maybe_unused]] ssize_t written = write(event_fd_, &one, sizeof(one));
}

void Wakeup::Mute() {
  Remove(epoll_fd_, fds_epoll_fd_);
}

void Wakeup::Unmute() {
  Add(epoll_fd_, fds_epoll_fd_);
}

void Wakeup::WaitUntil(std::chrono::steady_clock::time_point deadline,
                       const std::vector<int>& fds) {
  if (fds != registered_) {
    for (int fd : registered_) Remove(fds_epoll_fd_, fd);
    for (int fd : fds) Add(fds_epoll_fd_, fd);
    registered_ = fds;
  }
  epoll_event events[2];
  bool notified = false;
  for (;;) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec timeout{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    const int ready = epoll_pwait2(epoll_fd_, events, 2, &timeout, nullptr);
    if (ready < 0 && errno == EINTR) continue;
    for (int i = 0; i < ready; ++i) notified |= events[i].data.fd == event_fd_;
    break;  // ready, timed out, or an error no retry would fix
  }
  // Drain, then clear. A Notify between the two finds pending_ set and skips its write, which
  // is fine: it queued its work before notifying, and the caller looks after this returns. A
  // Notify after the clear writes, so the next wait returns at once. (Clearing first would
  // let a Notify in between write, have that write drained here and leave pending_ set over
  // an empty eventfd: every later Notify would skip its write and the next wait would sleep.)
  if (pending_.load() || notified) {
    uint64_t count = 0;
    // EAGAIN when a Notify has set pending_ but not written yet: its write then leaves the
    // eventfd readable and the next wait returns at once, harmlessly.
    [[maybe_unused]] ssize_t got = read(event_fd_, &count, sizeof(count));
  }
  pending_.store(false);
}

}  // namespace kolo
