// SignalPipe: the self-pipe trick. Turns SIGINT, SIGTERM, SIGHUP and SIGCHLD into bytes on a
// non-blocking pipe so that kolorun's single-threaded poll loop wakes up for them (a signal
// already ignored when kolorun starts stays ignored). At most one per process; the destructor
// restores the previous dispositions. Also ignores SIGPIPE, so that a closed stdout shows up
// as a write error instead of killing kolorun.
#pragma once

#include <csignal>
#include <memory>
#include <vector>

#include "kolo/status.h"

namespace kolo::launcher {

class SignalPipe {
 public:
  // The signals that are caught: forwarded to the ranks (all but SIGCHLD) or reaped (SIGCHLD).
  static const std::vector<int>& CaughtSignals();

  static StatusOr<std::unique_ptr<SignalPipe>> Install();
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Poll this for POLLIN.
  int read_fd() const { return read_fd_; }

  // The signals received since the last call, in arrival order (without blocking).
  std::vector<int> Drain();

  // In a forked child before exec: puts back the dispositions kolorun started with (so a rank
  // started from `nohup` still ignores SIGHUP). Async-signal-safe.
  void RestoreInChild() const;

 private:
  SignalPipe(int read_fd, int write_fd);

  const int read_fd_;
  const int write_fd_;
  std::vector<std::pair<int, struct sigaction>> saved_;  // restored by the destructor
};

// Blocks the caught signals in the calling thread while alive, so that a child between fork()
// and exec() cannot run kolorun's handlers before it has restored the original ones.
class ScopedSignalBlock {
 public:
  ScopedSignalBlock();
  ~ScopedSignalBlock();
  ScopedSignalBlock(const ScopedSignalBlock&) = delete;
  ScopedSignalBlock& operator=(const ScopedSignalBlock&) = delete;

  // In a forked child, after SignalPipe::RestoreInChild(): the mask kolorun started with.
  void RestoreInChild() const;

 private:
  sigset_t old_mask_;
};

}  // namespace kolo::launcher
