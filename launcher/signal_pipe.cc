// Self-pipe signal delivery for kolorun; see signal_pipe.h.
#include "launcher/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kolo::launcher {
namespace {

// The handler's only state: the pipe's write end. Set before any handler is installed.
volatile sig_atomic_t g_write_fd = -1;

void OnSignal(int sig) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  // A full pipe drops the byte; the loop reaps all children on any SIGCHLD, and a pipe with
  // 64 KiB of unread forwarded signals has more than enough of them already.
  ssize_t ignored = write(g_write_fd, &byte, 1);
  (void)ignored;
  errno = saved_errno;
}

}  // namespace

const std::vector<int>& SignalPipe::CaughtSignals() {
  static const std::vector<int> kSignals = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
  return kSignals;
}

SignalPipe::SignalPipe(int read_fd, int write_fd) : read_fd_(read_fd), write_fd_(write_fd) {}

StatusOr<std::unique_ptr<SignalPipe>> SignalPipe::Install() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Unavailable(std::string("cannot create the signal pipe: ") + std::strerror(errno));
  }
  std::unique_ptr<SignalPipe> pipe(new SignalPipe(fds[0], fds[1]));
  g_write_fd = fds[1];
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int sig : CaughtSignals()) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    // A signal ignored on entry stays ignored, for kolorun and its ranks alike (the shell's
    // rule: `nohup kolorun ...` and background jobs of a non-interactive shell).
    if (sig != SIGCHLD && old.sa_handler == SIG_IGN) continue;
    sigaction(sig, &action, nullptr);
    pipe->saved_.emplace_back(sig, old);
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction old_pipe {};
  sigaction(SIGPIPE, &ignore, &old_pipe);
  pipe->saved_.emplace_back(SIGPIPE, old_pipe);
  return pipe;
}

SignalPipe::~SignalPipe() {
  for (const auto& [sig, old] : saved_) sigaction(sig, &old, nullptr);
  g_write_fd = -1;
  close(read_fd_);
  close(write_fd_);
}

void SignalPipe::RestoreInChild() const {
  for (const auto& [sig, old] : saved_) sigaction(sig, &old, nullptr);
}

std::vector<int> SignalPipe::Drain() {
  std::vector<int> signals;
  unsigned char buffer[256];
  for (;;) {
    ssize_t n = read(read_fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    signals.insert(signals.end(), buffer, buffer + n);
  }
  return signals;
}

ScopedSignalBlock::ScopedSignalBlock() {
  sigset_t block;
  sigemptyset(&block);
  for (int sig : SignalPipe::CaughtSignals()) sigaddset(&block, sig);
  sigprocmask(SIG_BLOCK, &block, &old_mask_);
}

ScopedSignalBlock::~ScopedSignalBlock() {
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

void ScopedSignalBlock::RestoreInChild() const {
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace kolo::launcher
