// Job-fatal faults with real processes: one rank is SIGKILLed mid-allreduce; every other rank
// must fail within a bounded time with a message naming the lost rank, refuse later ops at
// once, and shut down promptly; over the TCP ring and over shared memory, which leaves nothing
// in /dev/shm.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Worker {
  pid_t pid = -1;
  int out_fd = -1;
  std::string buffer;
  std::vector<std::pair<Clock::time_point, std::string>> lines;
  int exit_code = -1;
};

Worker Spawn(int rank, int size, int port, double timeout_seconds, const std::string& transport) {
  int pipe_fds[2];
  REQUIRE(pipe2(pipe_fds, O_CLOEXEC) == 0);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("KOLO_", 0) != 0) env_strings.push_back(*e);
  }
  env_strings.push_back("KOLO_RANK=" + std::to_string(rank));
  env_strings.push_back("KOLO_SIZE=" + std::to_string(size));
  env_strings.push_back("KOLO_CONTROLLER=127.0.0.1:" + std::to_string(port));
  env_strings.push_back("KOLO_TIMEOUT_SECONDS=" + std::to_string(timeout_seconds));
  env_strings.push_back("KOLO_SECRET=" + std::string(64, 'f'));
  env_strings.push_back("KOLO_LOG_LEVEL=off");
  env_strings.push_back("KOLO_TRANSPORT=" + transport);
  std::vector<char*> env;
  for (auto& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  char path[] = KOLO_FAULT_WORKER;
  char* argv[] = {path, nullptr};
  Worker worker;
  REQUIRE(posix_spawn(&worker.pid, path, &actions, nullptr, argv, env.data()) == 0);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  worker.out_fd = pipe_fds[0];
  return worker;
}

// Reads whatever the workers printed until `done` holds or the deadline passes.
template <typename Pred>
bool Pump(std::vector<Worker>& workers, Clock::time_point deadline, Pred done) {
  while (!done()) {
    int ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (ms <= 0) return false;
    std::vector<pollfd> fds;
    for (auto& w : workers) fds.push_back({w.out_fd, POLLIN, 0});
    poll(fds.data(), fds.size(), std::min(ms, 100));
    for (size_t i = 0; i < workers.size(); ++i) {
      if (workers[i].out_fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      ssize_t n = read(workers[i].out_fd, buf, sizeof(buf));
      if (n <= 0) {
        close(workers[i].out_fd);
        workers[i].out_fd = -1;
        continue;
      }
      workers[i].buffer.append(buf, n);
      size_t nl;
      while ((nl = workers[i].buffer.find('\n')) != std::string::npos) {
        workers[i].lines.emplace_back(Clock::now(), workers[i].buffer.substr(0, nl));
        workers[i].buffer.erase(0, nl + 1);
      }
    }
  }
  return true;
}

const std::string* FindLine(const Worker& w, const std::string& prefix,
                            Clock::time_point* when = nullptr) {
  for (const auto& [t, line] : w.lines) {
    if (line.rfind(prefix, 0) == 0) {
      if (when) *when = t;
      return &line;
    }
  }
  return nullptr;
}

// Names in /dev/shm that start with `prefix`.
std::vector<std::string> ShmEntries(const std::string& prefix) {
  std::vector<std::string> found;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return found;
  while (dirent* entry = readdir(dir)) {
    if (std::string(entry->d_name).rfind(prefix, 0) == 0) found.push_back(entry->d_name);
  }
  closedir(dir);
  return found;
}

}  // namespace

TEST_CASE("A rank killed mid-allreduce fails every other rank quickly, naming it",
          "[runtime][fault]") {
  // A ring neighbour of everyone, the controller's host, and a rank two hops from rank 0.
  const auto [size, victim] = GENERATE(table<int, int>({{3, 2}, {3, 0}, {4, 2}}));
  const std::string transport = GENERATE(as<std::string>(), "tcp", "shm");
  const double timeout_seconds = 4.0;
  kolo::testing::Watchdog watchdog("peer loss over " + transport + ", victim rank " +
                                       std::to_string(victim) + " of " + std::to_string(size),
                                   std::chrono::seconds(60));
  int port = kolo::testing::PickFreePort();
  std::vector<Worker> workers;
  for (int r = 0; r < size; ++r) {
    workers.push_back(Spawn(r, size, port, timeout_seconds, transport));
  }

  bool all_ready = Pump(workers, Clock::now() + std::chrono::seconds(30), [&] {
    for (auto& w : workers) {
      if (!FindLine(w, "ready")) return false;
    }
    return true;
  });
  REQUIRE(all_ready);

  REQUIRE(kill(workers[victim].pid, SIGKILL) == 0);
  const Clock::time_point killed = Clock::now();
  Pump(workers, killed + std::chrono::seconds(20), [&] {
    for (int r = 0; r < size; ++r) {
      if (r != victim && !FindLine(workers[r], "SHUTDOWN")) return false;
    }
    return true;
  });
  for (auto& w : workers) {
    int status = 0;
    if (w.pid > 0 && waitpid(w.pid, &status, 0) == w.pid && WIFEXITED(status)) {
      w.exit_code = WEXITSTATUS(status);
    }
    if (w.out_fd >= 0) close(w.out_fd);
  }

  for (int r = 0; r < size; ++r) {
    if (r == victim) continue;
    INFO("rank " << r << " after rank " << victim << " was killed");
    Clock::time_point failed_at;
    const std::string* failed = FindLine(workers[r], "FAILED", &failed_at);
    REQUIRE(failed != nullptr);
    CHECK_THAT(*failed, Catch::Contains("rank " + std::to_string(victim)));
    double seconds = std::chrono::duration<double>(failed_at - killed).count();
    CHECK(seconds < 2 * timeout_seconds);
    const std::string* later = FindLine(workers[r], "LATER");
    REQUIRE(later != nullptr);
    CHECK_THAT(*later, !Catch::Contains(" OK"));
    CHECK(std::stod(later->substr(6)) < 100.0);  // refused at once
    const std::string* down = FindLine(workers[r], "SHUTDOWN");
    REQUIRE(down != nullptr);
    CHECK(std::stod(down->substr(9)) < 1000 * timeout_seconds);
    CHECK(workers[r].exit_code == 3);
  }
  // Rank 0 names the segment after its pid; the name was unlinked once every rank mapped it.
  CHECK(ShmEntries("kolo-" + std::to_string(workers[0].pid) + "-").empty());
}
