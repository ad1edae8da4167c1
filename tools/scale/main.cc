// kolo-scale: the control plane at N simulated ranks (docs/SCALE.md, "The control plane at
// scale"). For each rank count it forks two processes: the controller process (the real
// Controller behind the real GrpcControlServer; controller_host.h) and the ranks process (N
// real GrpcControlChannels; rank_swarm.h, scale_run.h), which talk over loopback TCP as a job
// does. This process only forks, waits with a deadline, and prints the table: it never starts
// gRPC, so each fork begins clean.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <thread>

#include "runtime/fd_limit.h"
#include "tools/scale/controller_host.h"
#include "tools/scale/scale_run.h"

namespace kolo::scale {
namespace {

using Clock = std::chrono::steady_clock;

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

// The ranks process: runs one rank count and writes "row|..." or "error|..." to `result_fd`.
int RanksProcess(int ranks, const ScaleOptions& options,
                 const transport::JobCredentials& credentials, int command_fd, int reply_fd,
                 int result_fd) {
  const auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.timeout_seconds));
  ControllerProbe probe(command_fd, reply_fd, timeout);
  StatusOr<ScaleRow> row = RunScale(ranks, options, credentials, &probe);
  if (!row.ok()) {
    (void)probe.Quit();
    (void)WriteLine(result_fd, "error|" + row.status().ToString(), "the parent");
    return 1;
  }
  (void)WriteLine(result_fd, "check|" + CheckLine(*row, options.steps), "the parent");
  (void)WriteLine(result_fd, "row|" + TableRow(*row), "the parent");
  return 0;
}

// Forks `body` as a child that exits with its result; -1 if fork failed.
pid_t Spawn(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed kolo-scale (a test's watchdog) leaves none
    _exit(body());
  }
  return pid;
}

// Waits for `pid` until `deadline`, then kills it; its exit code, or a message.
Status Reap(pid_t pid, const char* what, Clock::time_point deadline) {
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return DeadlineExceeded(std::string(what) + " did not finish in time; killed");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Internal(std::string(what) + " failed (wait status " + std::to_string(status) + ")");
}

// One rank count: both processes, their result lines, both reaped. Appends the table row and
// the check line.
Status RunOne(int ranks, const ScaleOptions& options, std::vector<std::string>* rows,
              std::vector<std::string>* checks) {
  // A job secret of its own, as kolorun makes one: the handshake runs as in a real job.
  KOLO_ASSIGN_OR_RETURN(std::string key, transport::RandomBytes(32));
  const transport::JobCredentials credentials{key, "kolo-scale"};
  std::array<int, 2> command{}, reply{}, result{};
  if (pipe(command.data()) != 0 || pipe(reply.data()) != 0 || pipe(result.data()) != 0) {
    return Internal("pipe() failed");
  }
  const pid_t controller = Spawn([&] {
    close(command[1]);
    close(reply[0]);
    close(result[0]);
    close(result[1]);
    return RunControllerHost(ranks, options.timeout_seconds, credentials, command[0], reply[1]);
  });
  const pid_t swarm = Spawn([&] {
    close(command[0]);
    close(reply[1]);
    close(result[0]);
    return RanksProcess(ranks, options, credentials, command[1], reply[0], result[1]);
  });
  for (int fd : {command[0], command[1], reply[0], reply[1], result[1]}) close(fd);
  if (controller < 0 || swarm < 0) return Internal("fork() failed");
  // Every step and the start-up each have the timeout; the whole count gets a few of them.
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                         options.timeout_seconds * (options.steps + 4)));
  Status outcome = Status::Ok();
  for (;;) {
    StatusOr<std::string> line = ReadLine(result[0], deadline, "the ranks process");
    if (!line.ok()) break;  // its end closed (it exited), or the deadline
    const std::string kind = line->substr(0, line->find('|'));
    const std::string text = line->substr(line->find('|') + 1);
    if (kind == "row") rows->push_back(text);
    if (kind == "check") checks->push_back(text);
    if (kind == "error") outcome = Internal(std::to_string(ranks) + " ranks: " + text);
  }
  close(result[0]);
  Status swarm_done = Reap(swarm, "the ranks process", deadline);
  Status controller_done =
      Reap(controller, "the controller process", Clock::now() + std::chrono::seconds(30));
  KOLO_RETURN_IF_ERROR(outcome);
  KOLO_RETURN_IF_ERROR(swarm_done);
  return controller_done;
}

int Main(int argc, char** argv) {
  StatusOr<ScaleOptions> options = ParseScaleOptions(argc, argv);
  if (!options.ok()) {
    std::cerr << "kolo-scale: " << options.status().message() << "\n";
    return 2;
  }
  if (options->help) {
    std::cout << ScaleUsage();
    return 0;
  }
  // A write to the pipe of a process that died is an error to report, not a signal that kills.
  signal(SIGPIPE, SIG_IGN);
  // Each process holds one descriptor per connection (and a few per gRPC channel).
  const FdLimitChange fds = RaiseFdLimitToHard();
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  std::cout << "command: " << command_line << "\n"
            << "cpu: " << CpuModel() << " (" << std::thread::hardware_concurrency()
            << " logical CPUs)\n"
            << "model: " << options->model << "; steps: 1 with full metadata, then "
            << options->steps << " cached; file descriptor limit " << fds.after << "\n"
            << std::endl;
  std::vector<std::string> rows, checks;
  int failed = 0;
  for (int ranks : options->ranks) {
    Status status = RunOne(ranks, *options, &rows, &checks);
    if (!status.ok()) {
      std::cerr << "kolo-scale: " << status.message() << std::endl;
      ++failed;
    }
  }
  std::cout << TableHeader() << "\n";
  for (const std::string& row : rows) std::cout << row << "\n";
  std::cout << "\n";
  for (const std::string& check : checks) std::cout << check << "\n";
  std::cout << std::flush;
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kolo::scale

int main(int argc, char** argv) {
  return kolo::scale::Main(argc, argv);
}
