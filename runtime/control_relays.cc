#include "runtime/control_relays.h"

#include <cstdint>
#include <cstdio>
#include <utility>

#include "runtime/local_address.h"

namespace kolo {
namespace {

// FNV-1a: the same 64 bits in every process of the job, whatever its build.
uint64_t Fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// A name no other job on this host takes: the job id and the controller address (a port one
// job holds at a time), hashed, and the relay's rank.
std::string RelayAddress(const Options& options, const std::string& controller_address,
                         int host_rank) {
  char job[17];
  std::snprintf(job, sizeof(job), "%016llx",
                static_cast<unsigned long long>(Fnv1a(options.job_id + "\n" + controller_address)));
  return "unix-abstract:kolo-" + std::string(job) + "-control-relay-of-rank-" +
         std::to_string(host_rank);
}

}  // namespace

std::string RelayPlan::Describe() const {
  return "the control relay run by rank " + std::to_string(host_rank) +
         " (KOLO_CONTROL_RELAYS=host) at " + address;
}

RelayPlan PlanControlRelay(const Options& options, const std::string& controller_address) {
  RelayPlan plan;
  if (options.control_relays != "host") return plan;
  const std::string asked = "KOLO_CONTROL_RELAYS=host: rank " + std::to_string(options.rank) +
                            " connects to the controller directly: ";
  if (options.local_rank < 0 || options.local_size < 0) {
    plan.direct_reason = asked +
                         "the launcher did not say its place on its host (KOLO_LOCAL_RANK, "
                         "KOLO_LOCAL_SIZE), which its relay's address derives from";
    return plan;
  }
  if (!options.tls_cert.empty() || !options.tls_ca.empty()) {
    plan.direct_reason = asked + "relays serve their hosts without TLS, and the job asks for it";
    return plan;
  }
  const int first = options.rank - options.local_rank;
  if (first < 0 || first + options.local_size > options.size ||
      options.local_rank >= options.local_size) {
    plan.direct_reason =
        asked + "its host's ranks cannot be consecutive (rank " + std::to_string(options.rank) +
        " is local rank " + std::to_string(options.local_rank) + " of " +
        std::to_string(options.local_size) + " in a job of " + std::to_string(options.size) + ")";
    return plan;
  }
  // Rank 0's host talks to the controller in its own process or next to it; a host of one
  // rank has nothing to gather.
  if (first == 0 || options.local_size == 1) return plan;
  plan.relayed = true;
  plan.hosts_relay = options.local_rank == 0;
  plan.host_rank = first;
  plan.members = options.local_size;
  plan.address = RelayAddress(options, controller_address, first);
  return plan;
}

StatusOr<std::unique_ptr<transport::ControlRelay>> StartHostRelay(
    const Options& options, const RelayPlan& plan, const std::string& controller_address,
    const transport::ControlSecurity& security, std::chrono::steady_clock::time_point deadline,
    const Logger& logger) {
  transport::RelayOptions relay;
  relay.controller_address = controller_address;
  relay.listen_address = plan.address;
  relay.host_rank = plan.host_rank;
  relay.first_member = plan.host_rank;
  relay.members = plan.members;
  relay.size = options.size;
  relay.host = options.host.empty() ? LocalHostName() : options.host;
  relay.timeout_seconds = options.timeout_seconds;
  relay.cycle_seconds = options.cycle_time_ms / 1000.0;
  relay.security = security;
  relay.logger = MakeLogger(options.rank, "control-relay", logger->level());
  StatusOr<std::unique_ptr<transport::ControlRelay>> started =
      transport::ControlRelay::Start(std::move(relay), deadline);
  if (!started.ok()) {
    return started.status().WithContext("starting " + plan.Describe() + " for ranks " +
                                        std::to_string(plan.host_rank) + " to " +
                                        std::to_string(plan.host_rank + plan.members - 1));
  }
  logger->info("{} serves ranks {} to {}", plan.Describe(), plan.host_rank,
               plan.host_rank + plan.members - 1);
  return started;
}

RelayedChannel::RelayedChannel(std::unique_ptr<ControlChannel> channel, const RelayPlan& plan)
    : channel_(std::move(channel)),
      relay_(plan.Describe()),
      host_rank_(plan.host_rank),
      first_hop_(plan.hosts_relay) {}

Status RelayedChannel::Named(const Status& error) const {
  if (error.ok()) return error;
  return error.WithContext("through " + relay_);
}

StatusOr<std::vector<PeerInfo>> RelayedChannel::Connect(
    const Hello& hello, std::chrono::steady_clock::time_point deadline,
    std::function<void()> wake) {
  StatusOr<std::vector<PeerInfo>> peers = channel_->Connect(hello, deadline, std::move(wake));
  if (peers.ok()) return peers;
  if (peers.status().code() != StatusCode::kDeadlineExceeded || first_hop_) {
    return Named(peers.status());
  }
  // The relay never listened: its rank did not start, failed, or runs on another host.
  return Status(peers.status().code(),
                relay_ + " never admitted rank " + std::to_string(hello.rank) +
                    " by the start deadline: is rank " + std::to_string(host_rank_) +
                    " running on this host, and are this host's ranks consecutive? (" +
                    peers.status().message() + ")");
}

void RelayedChannel::SetFatalHandler(std::function<void(const Status&)> on_fatal) {
  channel_->SetFatalHandler(
      [this, on_fatal = std::move(on_fatal)](const Status& why) { on_fatal(Named(why)); });
}

Status RelayedChannel::Send(const WorkerMessage& message) {
  return Named(channel_->Send(message));
}

StatusOr<std::optional<ControllerMessage>> RelayedChannel::TryReceive() {
  StatusOr<std::optional<ControllerMessage>> next = channel_->TryReceive();
  if (next.ok()) return next;
  return Named(next.status());
}

void RelayedChannel::Close(std::chrono::steady_clock::time_point deadline) {
  channel_->Close(deadline);
}

std::string RelayedChannel::generation() const {
  return channel_->generation();
}

}  // namespace kolo
