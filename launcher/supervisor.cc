// kolorun's event loop: output forwarding, signal forwarding and the stop policy. See
// supervisor.h.
#include "launcher/supervisor.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>

#include "launcher/output_streams.h"
#include "launcher/rank_process.h"
#include "launcher/signal_pipe.h"

namespace kolo::launcher {
namespace {

using Clock = std::chrono::steady_clock;

const char* SignalName(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGKILL:
      return "SIGKILL";
  }
  return "a signal";
}

struct Rank {
  pid_t pid = -1;
  int stdin_fd = -1;  // write end of its stdin pipe, held open while it runs; -1 if none
  bool running = false;
  std::unique_ptr<OutputStream> out;
  std::unique_ptr<OutputStream> err;
  bool HoldsPipes() const { return out->open() || err->open(); }
};

class Supervisor {
 public:
  Supervisor(const SupervisorConfig& config, SignalPipe* signals)
      : config_(config), signals_(signals) {}
  ~Supervisor();

  Status Start(const std::vector<RankLaunch>& plan);
  int Run();
  void Message(const std::string& text) const {
    WriteAll(config_.stderr_fd, "kolorun: " + text + "\n");
  }
  void Stop(int sig);

 private:
  bool Finished(Clock::time_point now) const;
  int PollTimeoutMs(Clock::time_point now) const;
  void PollOnce(Clock::time_point now);
  void HandleSignals(const std::vector<int>& signals);
  void Reap();
  void OnExit(int rank, int wait_status);
  void SignalAll(int sig);
  void CloseStdin(Rank& rank);
  Status OpenOutputFiles(int r, Rank* rank) const;
  int ExitCode() const;

  const SupervisorConfig config_;
  SignalPipe* const signals_;
  std::vector<Rank> ranks_;
  std::unordered_map<pid_t, int> rank_of_pid_;
  int running_ = 0;
  int first_failure_rank_ = -1;
  int first_failure_status_ = 0;
  int interrupt_signal_ = 0;  // the first SIGINT/SIGTERM/SIGHUP kolorun received
  bool stopping_ = false;
  std::optional<Clock::time_point> kill_at_;      // when to send SIGKILL
  std::optional<Clock::time_point> drain_until_;  // set once every rank has exited
};

Supervisor::~Supervisor() {
  for (Rank& rank : ranks_) CloseStdin(rank);
}

Status Supervisor::Start(const std::vector<RankLaunch>& plan) {
  if (!config_.output_dir.empty()) KOLO_RETURN_IF_ERROR(MakeDirectories(config_.output_dir));
  ranks_.reserve(plan.size());
  for (const RankLaunch& launch : plan) {
    const int r = launch.rank;
    StatusOr<RankProcess> process =
        SpawnRank(launch.argv, launch.env, *signals_, launch.stdin_data, launch.cpus);
    if (!process.ok()) {
      return process.status().WithContext("rank " + std::to_string(r) + " on " + launch.host);
    }
    const std::string prefix = "[" + std::to_string(r) + "] ";
    Rank rank;
    rank.pid = process->pid;
    rank.stdin_fd = process->stdin_fd;
    rank.running = true;
    rank.out = std::make_unique<OutputStream>(process->stdout_fd, config_.stdout_fd, prefix);
    rank.err = std::make_unique<OutputStream>(process->stderr_fd, config_.stderr_fd, prefix);
    rank_of_pid_[rank.pid] = r;
    ranks_.push_back(std::move(rank));
    ++running_;
    KOLO_RETURN_IF_ERROR(OpenOutputFiles(r, &ranks_.back()));
  }
  return Status::Ok();
}

Status Supervisor::OpenOutputFiles(int r, Rank* rank) const {
  if (config_.output_dir.empty()) return Status::Ok();
  const std::string base = config_.output_dir + "/rank." + std::to_string(r);
  KOLO_RETURN_IF_ERROR(CopyStreamTo(base + ".out", rank->out.get()));
  return CopyStreamTo(base + ".err", rank->err.get());
}

int Supervisor::Run() {
  for (Clock::time_point now = Clock::now(); !Finished(now); now = Clock::now()) {
    PollOnce(now);
    Reap();
    now = Clock::now();
    if (kill_at_ && now >= *kill_at_) {
      SignalAll(SIGKILL);
      kill_at_.reset();
    }
    if (running_ == 0 && !drain_until_) drain_until_ = now + config_.drain_grace;
  }
  // Pipes still held open by something a rank left behind: keep what they said so far.
  for (Rank& rank : ranks_) {
    rank.out->Finish();
    rank.err->Finish();
  }
  return ExitCode();
}

bool Supervisor::Finished(Clock::time_point now) const {
  if (running_ > 0) return false;
  for (const Rank& rank : ranks_) {
    if (rank.HoldsPipes()) return drain_until_ && now >= *drain_until_;
  }
  return true;
}

int Supervisor::PollTimeoutMs(Clock::time_point now) const {
  std::optional<Clock::time_point> next = kill_at_;
  if (drain_until_ && (!next || *drain_until_ < *next)) next = drain_until_;
  if (!next) return -1;
  if (*next <= now) return 0;
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(*next - now);
  return static_cast<int>(wait.count());
}

void Supervisor::PollOnce(Clock::time_point now) {
  std::vector<pollfd> fds;
  std::vector<OutputStream*> streams;  // streams[i] belongs to fds[i + 1]
  fds.push_back({signals_->read_fd(), POLLIN, 0});
  for (Rank& rank : ranks_) {
    for (OutputStream* stream : {rank.out.get(), rank.err.get()}) {
      if (!stream->open()) continue;
      fds.push_back({stream->fd, POLLIN, 0});
      streams.push_back(stream);
    }
  }
  int ready = poll(fds.data(), fds.size(), PollTimeoutMs(now));
  if (ready <= 0) return;  // timeout, or EINTR: the caller re-checks its deadlines
  if (fds[0].revents != 0) HandleSignals(signals_->Drain());
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) streams[i - 1]->Pump();
  }
}

void Supervisor::HandleSignals(const std::vector<int>& signals) {
  for (int sig : signals) {
    if (sig == SIGCHLD) continue;  // Run() reaps after every poll
    if (interrupt_signal_ == 0) interrupt_signal_ = sig;
    Message(std::string("received ") + SignalName(sig) + "; forwarding it to all ranks");
    Stop(sig);
  }
}

void Supervisor::Reap() {
  for (;;) {
    int wait_status = 0;
    pid_t pid = waitpid(-1, &wait_status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    auto it = rank_of_pid_.find(pid);
    if (it != rank_of_pid_.end()) OnExit(it->second, wait_status);
  }
}

void Supervisor::OnExit(int rank, int wait_status) {
  ranks_[static_cast<size_t>(rank)].running = false;
  // Over ssh, the remote rank's end of file: if ssh ended without it, it stops now.
  CloseStdin(ranks_[static_cast<size_t>(rank)]);
  --running_;
  bool failed = !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
  if (!failed || first_failure_rank_ >= 0) return;
  first_failure_rank_ = rank;
  first_failure_status_ = wait_status;
  if (stopping_) return;  // already stopping: this is most likely a consequence
  std::string text = "rank " + std::to_string(rank) + " " + DescribeWaitStatus(wait_status);
  Message(running_ > 0 ? text + "; stopping the other ranks" : text);
  Stop(SIGTERM);
}

void Supervisor::Stop(int sig) {
  stopping_ = true;
  SignalAll(sig);
  for (Rank& rank : ranks_) CloseStdin(rank);  // remote ranks stop at EOF even if ssh lingers
  if (!kill_at_) kill_at_ = Clock::now() + config_.kill_grace;
}

void Supervisor::SignalAll(int sig) {
  // Whole process groups, so that what a rank started (a shell's children) goes too.
  for (const Rank& rank : ranks_) {
    if (rank.running || rank.HoldsPipes()) kill(-rank.pid, sig);
  }
}

void Supervisor::CloseStdin(Rank& rank) {
  if (rank.stdin_fd >= 0) close(rank.stdin_fd);
  rank.stdin_fd = -1;
}

int Supervisor::ExitCode() const {
  if (first_failure_rank_ >= 0) return ExitCodeOf(first_failure_status_);
  if (interrupt_signal_ != 0) return 128 + interrupt_signal_;
  return 0;
}

// Three pipes and two output files per rank: raise the soft descriptor limit towards the hard
// one if needed.
Status EnsureDescriptors(int num_ranks) {
  const rlim_t needed = static_cast<rlim_t>(5 * num_ranks + 32);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return Status::Ok();
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
    return Unavailable("-np " + std::to_string(num_ranks) + " needs " + std::to_string(needed) +
                       " file descriptors, but the hard limit (ulimit -Hn) is " +
                       std::to_string(limit.rlim_max));
  }
  limit.rlim_cur = needed;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Unavailable(std::string("cannot raise the file descriptor limit: ") +
                       std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

int RunJob(const std::vector<RankLaunch>& plan, const SupervisorConfig& config) {
  auto message = [&config](const std::string& text) {
    WriteAll(config.stderr_fd, "kolorun: " + text + "\n");
  };
  Status descriptors = EnsureDescriptors(static_cast<int>(plan.size()));
  if (!descriptors.ok()) {
    message(descriptors.message());
    return 1;
  }
  StatusOr<std::unique_ptr<SignalPipe>> signals = SignalPipe::Install();
  if (!signals.ok()) {
    message(signals.status().message());
    return 1;
  }
  Supervisor supervisor(config, signals->get());
  Status started = supervisor.Start(plan);
  if (!started.ok()) {
    supervisor.Message("cannot start the job: " + started.message() +
                       "; stopping the ranks already started");
    supervisor.Stop(SIGTERM);
    supervisor.Run();
    return 1;
  }
  return supervisor.Run();
}

}  // namespace kolo::launcher
