#include "runtime/control_plane.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "controller/controller.h"
#include "core/op_text.h"
#include "transport/grpc/control_relay.h"
#include "transport/grpc/grpc_control_channel.h"
#include "transport/grpc/grpc_control_server.h"

namespace kolo {

using SteadyTime = std::chrono::steady_clock;

ControllerParts::ControllerParts() = default;
ControllerParts::ControllerParts(ControllerParts&&) noexcept = default;
ControllerParts::~ControllerParts() = default;

ControlPlane::ControlPlane() = default;
ControlPlane::~ControlPlane() = default;

void ControlPlane::Adopt(ControllerParts parts) {
  autotuner_ = std::move(parts.autotuner);
  local_channel_ = std::move(parts.channel);
  controller_ = std::move(parts.controller);
  server_ = std::move(parts.server);
  controller_started_ = parts.started;
}

void ControlPlane::AdoptRelay(std::unique_ptr<transport::ControlRelay> relay) {
  relay_ = std::move(relay);
}

ControlChannel* ControlPlane::OpenChannel(const std::string& controller_address,
                                          const RelayPlan& relay, const Options& options,
                                          const Logger& logger,
                                          std::function<void(const Status&)> on_fatal) {
  if (local_channel_) {
    channel_ = local_channel_.get();
  } else {
    grpc_channel_ = transport::GrpcControlChannel::Create(
        relay.relayed ? relay.address : controller_address, options.timeout_seconds,
        MakeLogger(options.rank, "control", logger->level()), security_);
    if (relay.relayed) {
      grpc_channel_ = std::make_unique<RelayedChannel>(std::move(grpc_channel_), relay);
    }
    channel_ = grpc_channel_.get();
  }
  channel_->SetFatalHandler(std::move(on_fatal));
  return channel_;
}

void ControlPlane::NoteLostRank(const std::string& lost, int lost_rank) {
  elastic_lost_rank_.store(lost_rank);
  controller_->AbortStart("the elastic generation lost a member while it started: " + lost +
                          " (kolorun's elastic driver)");
}

void ControlPlane::TellLateRanks(const Options& options, const Logger& logger) const {
  if (!controller_ || !server_ || options.start_timeout_seconds <= 0) return;
  // In an elastic job, the member kolorun's driver reported lost will never connect.
  auto not_told = [this] {
    std::vector<int> ranks = controller_->RanksNotTold();
    const int lost = elastic_lost_rank_.load();
    ranks.erase(std::remove(ranks.begin(), ranks.end(), lost), ranks.end());
    return ranks;
  };
  std::vector<int> untold = not_told();
  if (untold.empty()) return;
  SteadyTime::time_point deadline =
      controller_started_ + std::chrono::duration_cast<SteadyTime::duration>(
                                std::chrono::duration<double>(options.start_timeout_seconds));
  if (!options.elastic_rendezvous.empty()) {
    // In an elastic job the late rank is most likely the lost member itself (every live member
    // was waiting for the generation and connects within milliseconds); one that is only late
    // fails at its own start deadline and joins the next generation.
    deadline = std::min(deadline, SteadyTime::now() + std::chrono::seconds(2));
  }
  const std::string ranks = RankList(untold);
  logger->info(
      "the start was aborted; rank{} {} {} not connected yet: the controller stays up to tell "
      "{} why, at most until the start timeout (KOLO_START_TIMEOUT_SECONDS={})",
      untold.size() == 1 ? "" : "s", ranks, untold.size() == 1 ? "has" : "have",
      untold.size() == 1 ? "it" : "them", SecondsText(options.start_timeout_seconds));
  while (!untold.empty() && SteadyTime::now() < deadline) {
    // Polls a rare error path at a coarse step; the deadline bounds it.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    untold = not_told();
  }
}

bool ControlPlane::job_done() const {
  return controller_ && controller_->shutdown_sent();
}

void ControlPlane::Close(SteadyTime::time_point deadline) {
  if (channel_) channel_->Close(deadline);
  if (relay_) relay_->Stop(deadline);  // waits for the members' streams to end, by `deadline`
  if (server_) server_->Stop(deadline);
  if (controller_) controller_->Stop();
}

void ControlPlane::DropChannel() {
  channel_ = nullptr;
  grpc_channel_.reset();
}

void ControlPlane::Reset() {
  relay_.reset();
  server_.reset();
  controller_.reset();
  local_channel_.reset();  // the controller's outbox
}

}  // namespace kolo
