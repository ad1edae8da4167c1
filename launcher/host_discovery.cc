#include "launcher/host_discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launcher/rank_process.h"

namespace kolo::launcher {

StatusOr<std::vector<Host>> ParseDiscoveredHosts(const std::string& output, int default_slots) {
  std::string list;
  size_t start = 0;
  for (int line = 1; start <= output.size(); ++line) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    std::string text = output.substr(start, end - start);
    start = end + 1;
    while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t')) {
      text.pop_back();
    }
    const size_t first = text.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    text = text.substr(first);
    if (text.find(',') != std::string::npos) {
      return InvalidArgument("line " + std::to_string(line) + " '" + text +
                             "': one host a line, as HOST[:SLOTS]");
    }
    if (text.find(':') == std::string::npos) text += ":" + std::to_string(default_slots);
    StatusOr<std::vector<Host>> one = ParseHostList(text);
    if (!one.ok()) return one.status().WithContext("line " + std::to_string(line));
    list += (list.empty() ? "" : ",") + text;
  }
  if (list.empty()) return std::vector<Host>{};
  return ParseHostList(list);
}

StatusOr<std::unique_ptr<DiscoveryRun>> DiscoveryRun::Start(const std::string& script,
                                                            int default_slots,
                                                            std::chrono::milliseconds timeout) {
  std::unique_ptr<DiscoveryRun> run(
      new DiscoveryRun("--host-discovery-script '" + script + "'", default_slots, timeout));
  int out[2];
  if (pipe2(out, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Unavailable(run->what_ + ": cannot make a pipe: " + std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return Unavailable(run->what_ + ": cannot fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    // The child: leads its own process group (a hung script is killed with whatever it
    // started), restores the signal dispositions kolorun changed, stdout to the pipe.
    setpgid(0, 0);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(out[1], 1);
    fcntl(1, F_SETFL, 0);  // the script's end blocks, as a shell expects
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(kExecFailedCode);
  }
  setpgid(pid, pid);  // also here: Kill() may come before the child ran its setpgid
  close(out[1]);
  run->pid_ = pid;
  run->fd_ = out[0];
  run->deadline_ = Clock::now() + timeout;
  return run;
}

DiscoveryRun::~DiscoveryRun() {
  if (fd_ >= 0) close(fd_);
  if (pid_ > 0) Kill();
}

void DiscoveryRun::Kill() {
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  while (waitpid(pid_, &wait_status_, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

void DiscoveryRun::Pump() {
  while (fd_ >= 0) {
    char buffer[4096];
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      close(fd_);
      fd_ = -1;
      return;
    }
    output_.append(buffer, static_cast<size_t>(n));
    if (output_.size() > (1 << 20)) {
      too_long_ = true;  // not a host list; stopped as if it had hung
      close(fd_);
      fd_ = -1;
    }
  }
}

std::optional<StatusOr<std::vector<Host>>> DiscoveryRun::Check(Clock::time_point now) {
  if (reported_) return std::nullopt;
  Pump();
  bool exited = false;
  if (pid_ > 0 && !too_long_) {
    pid_t done;
    while ((done = waitpid(pid_, &wait_status_, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (done == pid_) {
      exited = true;
      Pump();  // what it wrote before it exited (something it left running may hold the pipe)
      kill(-pid_, SIGKILL);  // and what it left running goes with it
      pid_ = -1;
    }
  }
  if (!exited && !too_long_ && now < deadline_) return std::nullopt;
  reported_ = true;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (!exited) {
    Kill();
    if (too_long_) return InvalidArgument(what_ + " printed more than 1 MiB (killed)");
    return DeadlineExceeded(what_ + " did not finish within " + std::to_string(timeout_.count()) +
                            " ms (killed)");
  }
  if (!(WIFEXITED(wait_status_) && WEXITSTATUS(wait_status_) == 0)) {
    return Unavailable(what_ + " " + DescribeWaitStatus(wait_status_));
  }
  StatusOr<std::vector<Host>> hosts = ParseDiscoveredHosts(output_, default_slots_);
  if (!hosts.ok()) return hosts.status().WithContext(what_ + " printed a bad host");
  return hosts;
}

StatusOr<std::vector<Host>> RunDiscoveryScript(const std::string& script, int default_slots,
                                               std::chrono::milliseconds timeout) {
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<DiscoveryRun> run,
                        DiscoveryRun::Start(script, default_slots, timeout));
  for (;;) {
    if (auto result = run->Check(DiscoveryRun::Clock::now())) return *result;
    pollfd fd{run->fd(), POLLIN, 0};
    // Wakes at least every 10 ms: after end of file, for the script's exit and the deadline.
    if (poll(&fd, run->fd() >= 0 ? 1 : 0, 10) > 0) run->Pump();
  }
}

}  // namespace kolo::launcher
