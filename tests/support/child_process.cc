// The test suite's process runner; see child_process.h.
#include "tests/support/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace kolo::testing {
namespace {

std::string MakeTempFile(const char* tag) {
  std::string path = std::string("/tmp/kolo_test_child_") + tag + "_XXXXXX";
  int fd = mkstemp(path.data());
  if (fd < 0) {
    std::perror("mkstemp");
    std::abort();
  }
  close(fd);
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// How often output files are polled: they are files, not pipes, so that a child that writes
// more than a pipe holds never blocks on a test that is busy elsewhere.
constexpr std::chrono::milliseconds kPollInterval(5);

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& extra_env, Stdin stdin_mode)
    : out_path_(MakeTempFile("out")),
      err_path_(MakeTempFile("err")),
      start_(std::chrono::steady_clock::now()) {
  std::vector<std::string> args = argv;
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    // A variable of `extra_env` replaces this process's own of that name (getenv, and the
    // sanitizer runtimes, would otherwise see the first of the two).
    const std::string own(*entry);
    const std::string name = own.substr(0, own.find('=') + 1);
    const bool replaced =
        std::any_of(extra_env.begin(), extra_env.end(),
                    [&](const std::string& e) { return e.compare(0, name.size(), name) == 0; });
    if (!replaced) env.push_back(own);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> c_args = CStrings(args);
  std::vector<char*> c_env = CStrings(env);

  int to_child[2] = {-1, -1};
  if (stdin_mode == Stdin::kPipe && pipe2(to_child, O_CLOEXEC) != 0) {
    std::perror("pipe2");
    std::abort();
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_mode == Stdin::kPipe) {
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_TRUNC, 0);
  const int rc = posix_spawnp(&pid_, c_args[0], &actions, nullptr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (stdin_mode == Stdin::kPipe) {
    close(to_child[0]);
    stdin_fd_ = to_child[1];
  }
  if (rc != 0) {
    std::fprintf(stderr, "cannot start %s: error %d\n", c_args[0], rc);
    std::abort();
  }
}

ChildProcess::~ChildProcess() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  if (pid_ > 0) {
    kill(pid_, SIGCONT);  // a stopped child would not die until resumed
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  unlink(out_path_.c_str());
  unlink(err_path_.c_str());
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

void ChildProcess::WriteLine(const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] ssize_t n = write(stdin_fd_, text.data(), text.size());
}

void ChildProcess::CloseStdin() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
}

std::string ChildProcess::StdoutSoFar() const {
  return ReadFile(out_path_);
}

bool ChildProcess::WaitForOutput(const std::string& text, int times,
                                 std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (CountOccurrences(StdoutSoFar(), text) < times) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);  // polling a file, not syncing
  }
  return true;
}

std::string ChildProcess::StderrSoFar() const {
  return ReadFile(err_path_);
}

bool ChildProcess::WaitForStderr(const std::string& text, std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (StderrSoFar().find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);  // polling a file, not syncing
  }
  return true;
}

std::string ChildProcess::ReadLine(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const std::string out = StdoutSoFar();
    const size_t newline = out.find('\n', lines_read_to_);
    if (newline != std::string::npos) {
      std::string line = out.substr(lines_read_to_, newline - lines_read_to_);
      lines_read_to_ = newline + 1;
      return line;
    }
    if (std::chrono::steady_clock::now() >= deadline) return "";
    std::this_thread::sleep_for(kPollInterval);  // polling a file, not syncing
  }
}

ProcessResult ChildProcess::Wait() {
  ProcessResult result;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) std::abort();  // not our child: a broken test
  }
  pid_ = -1;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out_path_);
  result.err = ReadFile(err_path_);
  return result;
}

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::vector<std::string>& extra_env) {
  ChildProcess process(argv, extra_env);
  return process.Wait();
}

int CountOccurrences(const std::string& haystack, const std::string& needle) {
  int count = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace kolo::testing
