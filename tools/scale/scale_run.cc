#include "tools/scale/scale_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "tools/scale/rank_swarm.h"
#include "transport/deadline.h"
#include "transport/grpc/control_relay.h"

namespace kolo::scale {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

std::string Fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

// Where each rank's control stream goes: the controller, or with --relays R one of R control
// relays in this process, each for the next ceil(N / R) ranks and hosted (named) by the first.
struct Relays {
  std::string controller;
  std::vector<std::unique_ptr<transport::ControlRelay>> list;
  int group = 0;  // ranks a relay
  std::string AddressOf(int rank) const {
    return list.empty() ? controller : "127.0.0.1:" + std::to_string(list[rank / group]->port());
  }
};

Status StartRelays(int count, int ranks, const transport::JobCredentials& credentials,
                   double timeout_seconds, transport::SteadyTime deadline, Relays* relays) {
  if (count <= 0) return Status::Ok();
  relays->group = (ranks + count - 1) / count;
  for (int first = 0; first < ranks; first += relays->group) {
    transport::RelayOptions options;
    options.controller_address = relays->controller;
    options.host_rank = first;
    options.first_member = first;
    options.members = std::min(relays->group, ranks - first);
    options.size = ranks;
    options.host = "scale-relay-" + std::to_string(first);
    options.timeout_seconds = timeout_seconds;
    options.cycle_seconds = 0.001;  // KOLO_CYCLE_TIME_MS's default
    options.security.credentials = credentials;
    KOLO_ASSIGN_OR_RETURN(auto relay, transport::ControlRelay::Start(std::move(options), deadline));
    relays->list.push_back(std::move(relay));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ScaleRow> RunScale(int ranks, const ScaleOptions& options,
                            const transport::JobCredentials& credentials, ControllerProbe* probe) {
  KOLO_ASSIGN_OR_RETURN(std::vector<bench::ModelTensor> gradients,
                        bench::ModelGradients(options.model));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int drivers = std::min(ranks, options.drivers > 0 ? options.drivers : cores);
  const auto deadline = [&] {
    return transport::AddSeconds(Clock::now(), options.timeout_seconds);
  };
  ScaleRow row;
  row.ranks = ranks;
  KOLO_ASSIGN_OR_RETURN(const int port, probe->Port());
  const ProcessSample client_start = SampleSelf();
  KOLO_ASSIGN_OR_RETURN(const ProcessSample controller_start, probe->Sample());
  Relays relays{"127.0.0.1:" + std::to_string(port)};
  KOLO_RETURN_IF_ERROR(StartRelays(std::min(options.relays, ranks), ranks, credentials,
                                   options.timeout_seconds, deadline(), &relays));
  RankSwarm swarm(ranks, drivers, std::move(gradients), credentials, options.timeout_seconds);
  const Clock::time_point start = Clock::now();
  KOLO_RETURN_IF_ERROR(swarm.Connect([&](int rank) { return relays.AddressOf(rank); }));
  row.startup_ms = MsSince(start);
  const ProcessSample client_joined = SampleSelf();
  KOLO_ASSIGN_OR_RETURN(const ProcessSample controller_joined, probe->Sample());
  row.controller_threads = controller_joined.threads;
  row.controller_kib_per_rank =
      static_cast<double>(controller_joined.rss_kb - controller_start.rss_kb) / ranks;
  row.client_kib_per_rank = static_cast<double>(client_joined.rss_kb - client_start.rss_kb) / ranks;
  std::vector<double> wall_ms, cpu_ms, client_us;
  for (int step = 0; step <= options.steps; ++step) {
    KOLO_ASSIGN_OR_RETURN(const ProcessSample before, probe->Sample());
    const ProcessSample client_before = SampleSelf();
    const Clock::time_point step_start = Clock::now();
    KOLO_ASSIGN_OR_RETURN(const StepCheck check, swarm.Step(deadline()));
    const double wall = MsSince(step_start);
    const ProcessSample client_after = SampleSelf();
    KOLO_ASSIGN_OR_RETURN(const ProcessSample after, probe->Sample());
    const double cpu = static_cast<double>(after.cpu_ns - before.cpu_ns) / 1e6;
    row.responses = check.responses;
    row.tensors = check.tensors;
    if (step == 0) {
      row.first_step_ms = wall;
      row.first_step_cpu_ms = cpu;
      continue;
    }
    wall_ms.push_back(wall);
    cpu_ms.push_back(cpu);
    client_us.push_back(static_cast<double>(client_after.cpu_ns - client_before.cpu_ns) / 1e3 /
                        ranks);
    row.cached_step_cpu_max_ms = std::max(row.cached_step_cpu_max_ms, cpu);
  }
  row.cached_step_ms = Median(wall_ms);
  row.cached_step_cpu_ms = Median(cpu_ms);
  row.client_cpu_us_per_rank = Median(client_us);
  KOLO_ASSIGN_OR_RETURN(const ProcessSample controller_end, probe->Sample());
  row.controller_rss_mb = static_cast<double>(controller_end.rss_kb) / 1024;
  KOLO_RETURN_IF_ERROR(swarm.Shutdown(deadline()).WithContext("shutting the ranks down"));
  for (auto& relay : relays.list) relay->Stop(deadline());
  KOLO_RETURN_IF_ERROR(probe->Quit());
  return row;
}

std::string TableHeader() {
  return "| ranks | start-up ms | controller RSS MB | controller KiB/rank | controller threads | "
         "client KiB/rank | first step ms | first step controller CPU ms | cached step ms | "
         "cached step controller CPU ms (max) | client CPU us/rank/step |\n"
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
}

std::string TableRow(const ScaleRow& row) {
  return "| " + std::to_string(row.ranks) + " | " + Fixed(row.startup_ms, 1) + " | " +
         Fixed(row.controller_rss_mb, 1) + " | " + Fixed(row.controller_kib_per_rank, 1) + " | " +
         std::to_string(row.controller_threads) + " | " + Fixed(row.client_kib_per_rank, 1) +
         " | " + Fixed(row.first_step_ms, 2) + " | " + Fixed(row.first_step_cpu_ms, 2) + " | " +
         Fixed(row.cached_step_ms, 2) + " | " + Fixed(row.cached_step_cpu_ms, 2) + " (" +
         Fixed(row.cached_step_cpu_max_ms, 2) + ") | " + Fixed(row.client_cpu_us_per_rank, 1) +
         " |";
}

std::string CheckLine(const ScaleRow& row, int steps) {
  return "check: " + std::to_string(row.ranks) + " ranks: identical peer tables of " +
         std::to_string(row.ranks) + "; " + std::to_string(steps + 1) +
         " steps, every rank got the same " + std::to_string(row.responses) +
         " responses covering all " + std::to_string(row.tensors) + " tensors each step";
}

}  // namespace kolo::scale
