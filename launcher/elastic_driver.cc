// kolorun's elastic job loop; see elastic_driver.h.
#include "launcher/elastic_driver.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include "launcher/elastic_membership.h"
#include "launcher/host_discovery.h"
#include "launcher/output_streams.h"
#include "launcher/rank_process.h"
#include "launcher/signal_pipe.h"
#include "transport/grpc/elastic_rendezvous.h"

namespace kolo::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// The address of this host's interface that routes to `host`: where a worker there reaches the
// rendezvous. Sends nothing (a connected UDP socket is asked for its own address). Empty when
// the host does not resolve.
std::string AddressTowards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return "";
  std::string address;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
    char text[INET_ADDRSTRLEN] = {0};
    if (inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr) address = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return address;
}

// `hosts` with "localhost" given the address 127.0.0.1, so that a generation whose rank 0 is there
// has a controller address that needs no name lookup (an IP literal, as fixed jobs get).
std::vector<Host> WithLoopbackAddresses(std::vector<Host> hosts) {
  for (Host& host : hosts) {
    if (host.address.empty() && host.name == "localhost") host.address = "127.0.0.1";
  }
  return hosts;
}

struct WorkerProcess {
  pid_t pid = -1;
  int stdin_fd = -1;
  bool running = false;
  std::optional<Clock::time_point> kill_at;  // SIGKILL then, if still running
  std::unique_ptr<OutputStream> out;
  std::unique_ptr<OutputStream> err;
  bool HoldsPipes() const { return out->open() || err->open(); }
};

class ElasticDriver {
 public:
  ElasticDriver(const LaunchOptions& options, const JobLayout& job, const PlanContext& context,
                const ElasticDriverConfig& config, SignalPipe* signals)
      : options_(options),
        job_(job),
        context_(context),
        config_(config),
        signals_(signals),
        membership_(MembershipConfig(options, job)) {}
  ~ElasticDriver() {
    for (auto& [id, worker] : workers_) CloseStdin(worker);
  }

  Status Start();
  int Run();
  void Message(const std::string& text) const {
    WriteAll(config_.output.stderr_fd, "kolorun: " + text + "\n");
  }

 private:
  static ElasticMembership::Config MembershipConfig(const LaunchOptions& options,
                                                    const JobLayout& job);
  void Discover(Clock::time_point now);
  void ReportShortfall(Clock::time_point now);
  void StartWorkers(Clock::time_point now);
  Status StartWorker(const ElasticMembership::WorkerToStart& slot);
  void StopWorkers(Clock::time_point now);
  void StopAll(int sig, Clock::time_point now);
  void PollOnce(Clock::time_point now);
  void Reap(Clock::time_point now);
  void CloseStdin(WorkerProcess& worker);
  void ReportGeneration();
  bool Finished(Clock::time_point now);

  const LaunchOptions& options_;
  const JobLayout& job_;
  const PlanContext& context_;
  const ElasticDriverConfig config_;
  SignalPipe* const signals_;
  ElasticMembership membership_;
  std::unique_ptr<transport::ElasticRendezvousServer> server_;
  std::map<std::string, WorkerProcess> workers_;  // by worker id, while it holds something
  std::unordered_map<pid_t, std::string> id_of_pid_;
  std::unique_ptr<DiscoveryRun> discovery_;  // the script's run in progress, if any
  std::optional<Clock::time_point> next_discovery_;
  std::optional<Clock::time_point> shortfall_since_;  // of the shortfall last reported
  Clock::time_point next_shortfall_report_{};
  std::optional<Clock::time_point> drain_until_;
  std::string last_generation_text_;
  int failure_code_ = 0;      // 1 once the job failed (membership said it cannot go on)
  int interrupt_signal_ = 0;  // the first SIGINT/SIGTERM/SIGHUP kolorun received
};

ElasticMembership::Config ElasticDriver::MembershipConfig(const LaunchOptions& options,
                                                          const JobLayout& job) {
  ElasticMembership::Config config;
  config.initial_np = options.num_ranks;
  config.min_np = options.elastic.min_np;
  config.max_np = options.elastic.max_np;
  config.elastic_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options.elastic.timeout_seconds * 1000));
  config.reset_limit = options.elastic.reset_limit;
  config.cooldown_min_seconds = options.elastic.cooldown_min_seconds;
  config.cooldown_max_seconds = options.elastic.cooldown_max_seconds;
  config.job_id = job.job_id;
  return config;
}

Status ElasticDriver::Start() {
  if (!config_.output.output_dir.empty()) {
    KOLO_RETURN_IF_ERROR(MakeDirectories(config_.output.output_dir));
  }
  transport::JobCredentials credentials;
  KOLO_ASSIGN_OR_RETURN(credentials.key, transport::DecodeHex(job_.secret, "the job secret"));
  credentials.job_id = job_.job_id;
  KOLO_ASSIGN_OR_RETURN(
      server_, transport::ElasticRendezvousServer::Start("0.0.0.0:0", credentials, &membership_));
  if (options_.elastic.discovery_script.empty())
    membership_.UpdateHosts(WithLoopbackAddresses(options_.hosts), Clock::now());
  return Status::Ok();
}

// Starts the script when it is due and takes its result when it has one, never waiting for
// it: the loop goes on forwarding output, reaping and re-forming while a script hangs.
void ElasticDriver::Discover(Clock::time_point now) {
  if (options_.elastic.discovery_script.empty()) return;
  if (discovery_) {
    std::optional<StatusOr<std::vector<Host>>> hosts = discovery_->Check(now);
    if (!hosts) return;
    discovery_.reset();
    next_discovery_ = now + config_.discovery_interval;
    if (!hosts->ok()) {
      // The hosts stay as they were: a script that fails once is not a lost cluster.
      Message(hosts->status().message() + "; keeping the hosts it found before");
      return;
    }
    membership_.UpdateHosts(WithLoopbackAddresses(**hosts), now);
    return;
  }
  if (next_discovery_ && now < *next_discovery_) return;
  StatusOr<std::unique_ptr<DiscoveryRun>> started = DiscoveryRun::Start(
      options_.elastic.discovery_script, options_.elastic.slots > 0 ? options_.elastic.slots : 1,
      config_.discovery_timeout);
  if (!started.ok()) {
    Message(started.status().message() + "; keeping the hosts it found before");
    next_discovery_ = now + config_.discovery_interval;
    return;
  }
  discovery_ = std::move(*started);
}

// Fewer workers than --min-np: a line when the wait starts and every report interval after.
void ElasticDriver::ReportShortfall(Clock::time_point now) {
  std::optional<ElasticMembership::Shortfall> shortfall = membership_.ShortOfWorkers();
  if (!shortfall) {
    shortfall_since_.reset();
    return;
  }
  if (shortfall_since_ == shortfall->since && now < next_shortfall_report_) return;
  shortfall_since_ = shortfall->since;
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options_.elastic.timeout_seconds * 1000));
  const auto every = std::max(std::chrono::milliseconds(1000),
                              std::min(config_.shortfall_report_interval, timeout / 3));
  next_shortfall_report_ = now + every;
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(shortfall->until - now);
  const std::time_t until = std::chrono::system_clock::to_time_t(
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(shortfall->until - now));
  std::tm local{};
  localtime_r(&until, &local);
  char clock[16];
  std::strftime(clock, sizeof(clock), "%H:%M:%S", &local);
  Message(std::to_string(shortfall->live) + " worker(s), fewer than --min-np " +
          std::to_string(options_.elastic.min_np) + ": waiting for " +
          std::to_string(options_.elastic.min_np - shortfall->live) + " more slot(s) until " +
          clock + " (--elastic-timeout, " + std::to_string(std::max<int64_t>(0, left.count())) +
          " s left), then the job fails; " + shortfall->hosts);
}

void ElasticDriver::StartWorkers(Clock::time_point now) {
  for (const ElasticMembership::WorkerToStart& slot : membership_.TakeSlotsToFill(now)) {
    Status started = StartWorker(slot);
    if (!started.ok()) {
      Message("cannot start worker " + slot.worker_id + ": " + started.message());
      membership_.OnWorkerExit(slot.worker_id, kExecFailedCode, now);
    }
  }
}

Status ElasticDriver::StartWorker(const ElasticMembership::WorkerToStart& slot) {
  RankLaunch launch;
  launch.host = slot.host.name;
  const bool here =
      options_.launch_template.empty() && IsThisHost(slot.host.name, context_.this_host);
  std::string address = here ? "127.0.0.1" : AddressTowards(slot.host.Reachable());
  if (address.empty()) address = context_.this_host;
  launch.rank_vars = {
      {"KOLO_ELASTIC_RENDEZVOUS", address + ":" + std::to_string(server_->port())},
      {"KOLO_ELASTIC_WORKER_ID", slot.worker_id},
      {"KOLO_ELASTIC_TIMEOUT_SECONDS", std::to_string(options_.elastic.timeout_seconds)},
      {"KOLO_JOB_ID", job_.job_id},
      {"KOLO_HOSTNAME", slot.host.name},
      {"HOROVOD_HOSTNAME", slot.host.name},
      {"HOROVOD_ELASTIC", "1"},
  };
  if (!options_.start_timeout.empty()) {
    launch.rank_vars.emplace_back("KOLO_START_TIMEOUT_SECONDS", options_.start_timeout);
  }
  KOLO_RETURN_IF_ERROR(PlanLaunchPath(options_, slot.host, job_.secret, context_, &launch));
  KOLO_ASSIGN_OR_RETURN(RankProcess process,
                        SpawnRank(launch.argv, launch.env, *signals_, launch.stdin_data));
  const std::string prefix = "[" + slot.worker_id + "] ";
  WorkerProcess& worker = workers_[slot.worker_id];
  worker = WorkerProcess{};
  worker.pid = process.pid;
  worker.stdin_fd = process.stdin_fd;
  worker.running = true;
  worker.out = std::make_unique<OutputStream>(process.stdout_fd, config_.output.stdout_fd, prefix);
  worker.err = std::make_unique<OutputStream>(process.stderr_fd, config_.output.stderr_fd, prefix);
  id_of_pid_[process.pid] = slot.worker_id;
  if (!config_.output.output_dir.empty()) {
    const std::string base = config_.output.output_dir + "/worker." + slot.worker_id;
    KOLO_RETURN_IF_ERROR(CopyStreamTo(base + ".out", worker.out.get()));
    KOLO_RETURN_IF_ERROR(CopyStreamTo(base + ".err", worker.err.get()));
  }
  return Status::Ok();
}

void ElasticDriver::StopWorkers(Clock::time_point now) {
  for (const ElasticMembership::StopOrder& order : membership_.TakeWorkersToStop()) {
    auto it = workers_.find(order.worker_id);
    if (it == workers_.end() || !it->second.running) continue;
    Message("stopping worker " + order.worker_id + ": " + order.reason);
    kill(-it->second.pid, SIGTERM);
    CloseStdin(it->second);
    it->second.kill_at = now + config_.output.kill_grace;
  }
}

void ElasticDriver::StopAll(int sig, Clock::time_point now) {
  for (auto& [id, worker] : workers_) {
    if (!worker.running) continue;
    kill(-worker.pid, sig);
    CloseStdin(worker);
    if (!worker.kill_at) worker.kill_at = now + config_.output.kill_grace;
  }
}

void ElasticDriver::PollOnce(Clock::time_point now) {
  std::vector<pollfd> fds;
  std::vector<OutputStream*> streams;  // streams[i] belongs to fds[i + 1]
  fds.push_back({signals_->read_fd(), POLLIN, 0});
  for (auto& [id, worker] : workers_) {
    for (OutputStream* stream : {worker.out.get(), worker.err.get()}) {
      if (!stream->open()) continue;
      fds.push_back({stream->fd, POLLIN, 0});
      streams.push_back(stream);
    }
  }
  const bool discovering = discovery_ && discovery_->fd() >= 0;
  if (discovering) fds.push_back({discovery_->fd(), POLLIN, 0});
  // Wakes at least every 50 ms for the membership's deadlines, discovery and kill timers.
  int ready = poll(fds.data(), fds.size(), 50);
  if (ready <= 0) return;
  if (discovering) {
    if (fds.back().revents != 0) discovery_->Pump();
    fds.pop_back();
  }
  if (fds[0].revents != 0) {
    for (int sig : signals_->Drain()) {
      if (sig == SIGCHLD) continue;
      if (interrupt_signal_ == 0) interrupt_signal_ = sig;
      Message("received signal " + std::to_string(sig) + "; forwarding it to every worker");
      StopAll(sig, now);
    }
  }
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) streams[i - 1]->Pump();
  }
}

// Reaps the workers by pid (not waitpid(-1): the discovery script's run reaps its own).
void ElasticDriver::Reap(Clock::time_point now) {
  std::vector<std::pair<pid_t, int>> ended;
  for (const auto& [pid, id] : id_of_pid_) {
    int wait_status = 0;
    pid_t done;
    while ((done = waitpid(pid, &wait_status, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (done == pid) ended.emplace_back(pid, wait_status);
  }
  for (const auto& [pid, wait_status] : ended) {
    auto it = id_of_pid_.find(pid);
    const std::string id = it->second;
    id_of_pid_.erase(it);
    WorkerProcess& worker = workers_[id];
    worker.running = false;
    worker.kill_at.reset();
    CloseStdin(worker);
    const int code = ExitCodeOf(wait_status);
    if (code != 0 && interrupt_signal_ == 0 && failure_code_ == 0) {
      Message("worker " + id + " " + DescribeWaitStatus(wait_status));
    }
    membership_.OnWorkerExit(id, code, now);
  }
}

void ElasticDriver::CloseStdin(WorkerProcess& worker) {
  if (worker.stdin_fd >= 0) close(worker.stdin_fd);
  worker.stdin_fd = -1;
}

void ElasticDriver::ReportGeneration() {
  const std::string text = membership_.Describe();
  if (text == last_generation_text_ || text.rfind("generation 0:", 0) == 0) return;
  last_generation_text_ = text;
  Message(text);
}

bool ElasticDriver::Finished(Clock::time_point now) {
  for (const auto& [id, worker] : workers_) {
    if (worker.running) return false;
  }
  // A job ends when a worker finished it, it failed, or kolorun was interrupted; until then,
  // with every worker gone (hosts removed), it waits for hosts (Tick bounds the wait).
  if (failure_code_ == 0 && interrupt_signal_ == 0 && !membership_.Finishing()) return false;
  if (!membership_.AllExited()) return false;
  bool holds_pipes = false;
  for (const auto& [id, worker] : workers_) holds_pipes |= worker.HoldsPipes();
  if (!holds_pipes) return true;
  if (!drain_until_) drain_until_ = now + config_.output.drain_grace;
  return now >= *drain_until_;
}

int ElasticDriver::Run() {
  for (Clock::time_point now = Clock::now(); !Finished(now); now = Clock::now()) {
    if (failure_code_ == 0 && interrupt_signal_ == 0) {
      Discover(now);
      StartWorkers(now);
      Status going = membership_.Tick(now);
      for (const std::string& notice : membership_.TakeNotices()) Message(notice);
      if (!going.ok()) {
        Message("the elastic job cannot go on: " + going.message() + "; stopping every worker");
        failure_code_ = 1;
        StopAll(SIGTERM, now);
      }
      StopWorkers(now);
      ReportGeneration();
      ReportShortfall(now);
    }
    PollOnce(now);
    Reap(Clock::now());
    now = Clock::now();
    for (auto& [id, worker] : workers_) {
      if (worker.running && worker.kill_at && now >= *worker.kill_at) {
        kill(-worker.pid, SIGKILL);
        worker.kill_at.reset();
      }
    }
  }
  for (auto& [id, worker] : workers_) {
    worker.out->Finish();
    worker.err->Finish();
  }
  if (server_) server_->Stop();
  if (failure_code_ == 0 && interrupt_signal_ != 0 && !membership_.Finishing()) {
    return 128 + interrupt_signal_;
  }
  const int code = membership_.ExitCode(failure_code_);
  if (code == 0 && interrupt_signal_ != 0) return 128 + interrupt_signal_;
  return code;
}

}  // namespace

int RunElasticJob(const LaunchOptions& options, const JobLayout& job, const PlanContext& context,
                  const ElasticDriverConfig& config) {
  StatusOr<std::unique_ptr<SignalPipe>> signals = SignalPipe::Install();
  if (!signals.ok()) {
    WriteAll(config.output.stderr_fd, "kolorun: " + signals.status().message() + "\n");
    return 1;
  }
  ElasticDriver driver(options, job, context, config, signals->get());
  Status started = driver.Start();
  if (!started.ok()) {
    driver.Message("cannot start the elastic job: " + started.message());
    return 1;
  }
  return driver.Run();
}

}  // namespace kolo::launcher
