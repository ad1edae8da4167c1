#include "tests/runtime/rank_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

extern char** environ;

namespace kolo::testing {

RankProcess::RankProcess(const std::string& path, const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& env, bool with_stderr) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("KOLO_", 0) != 0) env_strings.push_back(*e);
  }
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = {path};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  if (with_stderr) posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  if (posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) {
    pid_ = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  out_fd_ = pipe_fds[0];
}

RankProcess::~RankProcess() {
  if (running()) {
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

RankProcess::Clock::time_point RankProcess::Signal(int sig) {
  // Taken before the signal: a survivor can notice a SIGKILL within microseconds (over shared
  // memory), sooner than this thread returns from kill().
  const Clock::time_point sent = Clock::now();
  kill(pid_, sig);
  return sent;
}

std::optional<std::string> RankProcess::Find(const std::string& prefix) const {
  std::vector<std::string> all = FindAll(prefix);
  if (all.empty()) return std::nullopt;
  return all.front();
}

std::vector<std::string> RankProcess::FindAll(const std::string& prefix) const {
  std::vector<std::string> found;
  for (const std::string& line : lines_) {
    if (line.rfind(prefix + " ", 0) == 0) found.push_back(line.substr(prefix.size() + 1));
  }
  return found;
}

int RankProcess::WaitExit(std::chrono::milliseconds limit) {
  if (reaped_) return exit_code_;
  const Clock::time_point deadline = Clock::now() + limit;
  for (;;) {
    ReadAvailable();  // a worker blocked on a full pipe would never exit
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      ReadAvailable();
      return exit_code_;
    }
    if (Clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a child's exit
  }
}

void RankProcess::ReadAvailable() {
  while (out_fd_ >= 0) {
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, 0) != 1) return;
    char buf[4096];
    const ssize_t n = read(out_fd_, buf, sizeof(buf));
    if (n <= 0) {
      close(out_fd_);
      out_fd_ = -1;
      return;
    }
    partial_.append(buf, static_cast<size_t>(n));
    size_t newline;
    while ((newline = partial_.find('\n')) != std::string::npos) {
      lines_.push_back(partial_.substr(0, newline));
      partial_.erase(0, newline + 1);
    }
  }
}

bool RankProcess::Pump(const std::vector<RankProcess*>& processes, Clock::time_point deadline,
                       const std::function<bool()>& done) {
  for (;;) {
    for (RankProcess* p : processes) p->ReadAvailable();
    if (done()) return true;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    std::vector<pollfd> fds;
    for (RankProcess* p : processes) {
      if (p->out_fd_ >= 0) fds.push_back({p->out_fd_, POLLIN, 0});
    }
    const int wait_ms = static_cast<int>(std::min<long long>(left, 100));
    if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));  // nothing to read
    } else {
      poll(fds.data(), fds.size(), wait_ms);
    }
  }
}

RankProcess::Clock::time_point WorkerTime(const std::string& fields) {
  const long long ns = std::strtoll(fields.c_str(), nullptr, 10);
  return RankProcess::Clock::time_point(std::chrono::nanoseconds(ns));
}

std::string AfterTime(const std::string& fields) {
  const size_t space = fields.find(' ');
  return space == std::string::npos ? "" : fields.substr(space + 1);
}

double SecondsBetween(RankProcess::Clock::time_point a, RankProcess::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace kolo::testing
