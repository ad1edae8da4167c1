// Process runner for the tools' tests; see subprocess.h.
#include "tests/tools/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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
  std::string path = std::string("/tmp/kolo_tools_test_") + tag + "_XXXXXX";
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

}  // namespace

Subprocess::Subprocess(const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env)
    : out_path_(MakeTempFile("out")),
      err_path_(MakeTempFile("err")),
      start_(std::chrono::steady_clock::now()) {
  std::vector<std::string> args = argv;
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> c_args = CStrings(args);
  std::vector<char*> c_env = CStrings(env);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_TRUNC, 0);
  int rc = posix_spawnp(&pid_, c_args[0], &actions, nullptr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    std::fprintf(stderr, "cannot start %s: error %d\n", c_args[0], rc);
    std::abort();
  }
}

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  unlink(out_path_.c_str());
  unlink(err_path_.c_str());
}

std::string Subprocess::StdoutSoFar() const {
  return ReadFile(out_path_);
}

bool Subprocess::WaitForOutput(const std::string& text, int times,
                               std::chrono::milliseconds limit) const {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (CountOccurrences(StdoutSoFar(), text) < times) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a file, not syncing
  }
  return true;
}

ProcessResult Subprocess::Wait() {
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
  Subprocess process(argv, extra_env);
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

std::map<std::string, std::string> VariablesOfRank(const std::string& out, int rank) {
  std::map<std::string, std::string> vars;
  const std::string prefix = "[" + std::to_string(rank) + "] ";
  for (const std::string& line : SplitLines(out)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const std::string rest = line.substr(prefix.size());
    const size_t eq = rest.find('=');
    if (eq != std::string::npos) vars[rest.substr(0, eq)] = rest.substr(eq + 1);
  }
  return vars;
}

}  // namespace kolo::testing
