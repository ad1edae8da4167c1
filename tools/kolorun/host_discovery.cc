#include "tools/kolorun/host_discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tools/kolorun/rank_process.h"

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

StatusOr<std::vector<Host>> RunDiscoveryScript(const std::string& script, int default_slots,
                                               std::chrono::milliseconds timeout) {
  const std::string what = "--host-discovery-script '" + script + "'";
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return Unavailable(what + ": cannot make a pipe: " + std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return Unavailable(what + ": cannot fork: " + std::strerror(errno));
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
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(kExecFailedCode);
  }
  close(out[1]);
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{out[0], POLLIN, 0};
    int ready = poll(&fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[4096];
    ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buffer, static_cast<size_t>(n));
    if (output.size() > (1 << 20)) {
      timed_out = true;  // not a host list; stop it as if it had hung
      break;
    }
  }
  close(out[0]);
  int status = 0;
  // Its stdout is closed; it must also exit by the deadline.
  while (!timed_out) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    usleep(1000);
  }
  if (timed_out) {
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (timed_out) {
    return DeadlineExceeded(what + " did not finish within " + std::to_string(timeout.count()) +
                            " ms (killed)");
  }
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    return Unavailable(what + " " + DescribeWaitStatus(status));
  }
  StatusOr<std::vector<Host>> hosts = ParseDiscoveredHosts(output, default_slots);
  if (!hosts.ok()) return hosts.status().WithContext(what + " printed a bad host");
  return hosts;
}

}  // namespace kolo::launcher
