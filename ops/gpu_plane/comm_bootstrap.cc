#include "ops/gpu_plane/comm_bootstrap.h"

#include <thread>
#include <vector>

#include "ops/chain_broadcast.h"
#include "ops/gpu_plane/rank_bytes.h"

namespace kolo {
namespace {

// One rank's outcome of the init, as allgathered.
enum Outcome : uint8_t { kReady = 0, kFailed = 1, kLate = 2 };

}  // namespace

CommBootstrap::CommBootstrap(gpu::CollectiveApi* collectives, DataPlane* mesh, const Config& config,
                             Logger logger)
    : coll_(collectives), mesh_(mesh), config_(config), logger_(std::move(logger)) {}

CommBootstrap::~CommBootstrap() {
  if (comm_ == nullptr) return;
  Status destroyed = coll_->Destroy(comm_);
  if (!destroyed.ok()) logger_->warn("freeing the NCCL communicator: {}", destroyed.message());
}

StatusOr<gpu::CommHandle> CommBootstrap::Get(int device) {
  if (!failed_.ok()) return failed_;
  if (comm_ != nullptr) {
    if (device == device_) return comm_;
    return InvalidArgument(
        "a rank uses one GPU: this rank's NCCL communicator is on cuda:" + std::to_string(device_) +
        ", and an op asks for cuda:" + std::to_string(device));
  }
  const Status verdict = Agree(Join(device), device);
  if (!verdict.ok()) {
    // Some rank is not in it: nothing may wait on this communicator.
    if (comm_ != nullptr) coll_->Abort(comm_).IgnoreError();  // the verdict is the error
    failed_ = verdict;
    return verdict;
  }
  device_ = device;
  logger_->info("NCCL communicator of {} ranks ready on cuda:{} ({})", config_.size, device,
                coll_->name());
  return comm_;
}

Status CommBootstrap::Join(int device) {
  gpu::UniqueId id{};
  if (config_.rank == 0) {
    KOLO_ASSIGN_OR_RETURN(id, coll_->NewUniqueId());
  }
  if (config_.size > 1) {
    KOLO_RETURN_IF_ERROR(
        ops::ChainBroadcast(*mesh_, id.data(), id.size(), 0, "sending the NCCL unique id"));
  }
  KOLO_ASSIGN_OR_RETURN(comm_, coll_->InitComm(config_.size, config_.rank, id, device));
  const Clock::TimePoint deadline = config_.clock->Now() + DurationOf(config_.timeout_seconds);
  for (;;) {
    StatusOr<gpu::CommState> state = coll_->PollComm(comm_);
    if (!state.ok()) return state.status();
    if (*state == gpu::CommState::kReady) return Status::Ok();
    if (config_.clock->Now() >= deadline) {
      coll_->Abort(comm_).IgnoreError();  // the deadline is what we report
      return DeadlineExceeded("did not finish within " + SecondsText(config_.timeout_seconds) +
                              " (KOLO_TIMEOUT_SECONDS)");
    }
    std::this_thread::sleep_for(config_.poll_interval);
  }
}

Status CommBootstrap::Agree(const Status& local, int device) {
  const uint8_t mine = local.ok()                                      ? kReady
                       : local.code() == StatusCode::kDeadlineExceeded ? kLate
                                                                       : kFailed;
  StatusOr<std::vector<uint8_t>> outcomes = AllgatherRankBytes(
      *mesh_, config_.rank, config_.size, mine, "gathering the NCCL communicator's init outcomes");
  if (!outcomes.ok()) return local.ok() ? outcomes.status() : local;
  std::string ranks;
  for (int r = 0; r < config_.size; ++r) {
    const uint8_t outcome = (*outcomes)[static_cast<size_t>(r)];
    if (outcome == kReady) continue;
    ranks += (ranks.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) +
             (outcome == kLate ? " did not finish within " + SecondsText(config_.timeout_seconds)
                               : " failed");
  }
  if (ranks.empty()) return Status::Ok();
  std::string message = "creating the NCCL communicator (" + coll_->name() + ", " +
                        std::to_string(config_.size) +
                        " ranks, this rank on cuda:" + std::to_string(device) + "): " + ranks;
  if (!local.ok()) message += "; here: " + local.message();
  return Status(local.ok() ? StatusCode::kAborted : local.code(), message);
}

}  // namespace kolo
