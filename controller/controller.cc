#include "controller/controller.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "controller/fusion_planner.h"

namespace kolo::controller {
namespace {

Negotiator::Config NegotiatorConfig(const Controller::Config& c) {
  return Negotiator::Config{c.size, c.fusion_threshold_bytes, c.cache_capacity};
}

Clock::TimePoint::duration CycleDuration(double ms) {
  return std::chrono::duration_cast<Clock::TimePoint::duration>(
      std::chrono::duration<double, std::milli>(ms));
}

const Controller::Config& CheckedConfig(const Controller::Config& config) {
  Status status = config.Validate();
  if (!status.ok()) {
    std::fprintf(stderr, "kolo: invalid controller config: %s\n", status.message().c_str());
    std::abort();  // programmer error: the runtime validates Options before building this
  }
  return config;
}

// One debug line per planned batch; formatted only when debug is on.
void LogBatch(const Logger& logger, const std::vector<Response>& responses) {
  if (!logger->should_log(spdlog::level::debug)) return;
  size_t tensors = 0;
  for (const Response& r : responses) tensors += r.names.size();
  logger->debug("cycle: {} tensors in {} responses, seq {}..{}", tensors, responses.size(),
                responses.front().seq, responses.back().seq);
  if (!logger->should_log(spdlog::level::trace)) return;
  for (const Response& r : responses) {
    std::string names;
    for (const std::string& name : r.names) names += (names.empty() ? "'" : ", '") + name + "'";
    logger->trace("seq {}: {} {} of {}{}", r.seq, OpTypeName(r.op), DataTypeName(r.dtype), names,
                  r.is_error() ? " failed: " + r.error : "");
  }
}

}  // namespace

Status Controller::Config::Validate() const {
  if (size < 1) return InvalidArgument("controller size must be >= 1, got " + std::to_string(size));
  if (fusion_threshold_bytes < 0) {
    return InvalidArgument("fusion threshold must be >= 0 bytes, got " +
                           std::to_string(fusion_threshold_bytes));
  }
  if (!std::isfinite(cycle_time_ms) || cycle_time_ms < 0) {
    return InvalidArgument("cycle time must be a finite number of ms >= 0, got " +
                           std::to_string(cycle_time_ms));
  }
  if (cache_capacity < 0) {
    return InvalidArgument("cache capacity must be >= 0, got " + std::to_string(cache_capacity));
  }
  return Status::Ok();
}

Controller::Controller(const Config& config, Clock* clock, Logger logger)
    : config_(CheckedConfig(config)),
      cycle_(CycleDuration(config.cycle_time_ms)),
      clock_(clock),
      logger_(std::move(logger)),
      negotiator_(NegotiatorConfig(config)),
      rendezvous_(config.size, config.job_token) {
  logger_->info("controller: size {}, fusion threshold {} bytes, cycle time {} ms, cache {}",
                config_.size, config_.fusion_threshold_bytes, config_.cycle_time_ms,
                config_.cache_capacity);
}

Controller::~Controller() {
  Stop();
}

void Controller::Attach(ControllerOutbox* outbox) {
  {
    std::lock_guard<std::mutex> send_lock(send_mu_);
    outbox_ = outbox;
  }
  Flush();
}

void Controller::Start() {
  sequencer_ = std::thread([this] { SequencerLoop(); });
}

void Controller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (sequencer_.joinable()) sequencer_.join();
}

Status Controller::OnHello(const Hello& hello) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return Aborted("the job was aborted: " + abort_reason_);
    Status status = rendezvous_.Admit(hello);
    if (!status.ok()) {
      logger_->warn("refused a worker: {}", status.message());
      return status;
    }
    logger_->debug("rank {} joined from {} (data plane {})", hello.rank, hello.host,
                   hello.data_address);
    if (rendezvous_.complete()) {
      ControllerMessage welcome;
      welcome.kind = ControllerMessage::Kind::kWelcome;
      welcome.peers = rendezvous_.peers();
      QueueLocked(-1, std::move(welcome));
      logger_->info("all {} ranks joined; sent Welcome", config_.size);
    }
  }
  Flush();
  return Status::Ok();
}

void Controller::OnMessage(int rank, const WorkerMessage& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rendezvous_.admitted(rank)) {
      logger_->warn("ignored a message from rank {}, which has not been admitted", rank);
      return;
    }
    switch (message.kind) {
      case WorkerMessage::Kind::kPing:
        return;
      case WorkerMessage::Kind::kHello:
        AbortLocked("protocol error: rank " + std::to_string(rank) + " sent a second Hello");
        break;
      case WorkerMessage::Kind::kRequests:
        HandleRequestsLocked(rank, message.requests);
        break;
      case WorkerMessage::Kind::kShutdown:
        HandleShutdownLocked(rank);
        break;
      case WorkerMessage::Kind::kAbort:
        AbortLocked("rank " + std::to_string(rank) + ": " + message.reason);
        break;
    }
  }
  Flush();
}

void Controller::OnStreamClosed(int rank, const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Refused streams never had an admitted rank; their closing must not touch the job.
    if (!rendezvous_.admitted(rank)) return;
    if (shutdown_sent_) {
      logger_->debug("rank {} closed its stream after the job-wide shutdown", rank);
      return;
    }
    if (negotiator_.table().has_shut_down(rank)) {
      logger_->info("rank {} left before every rank had shut down", rank);
      const int before = negotiator_.ready_count();
      negotiator_.AddGone(rank);
      NoteReadyLocked(before);
      return;  // the sequencer plans and sends the failures
    }
    AbortLocked(
        "rank " + std::to_string(rank) + " lost: " +
        (why.ok() ? std::string("its stream closed without a shutdown notice") : why.message()));
  }
  Flush();
}

void Controller::HandleRequestsLocked(int rank, const std::vector<Request>& requests) {
  if (aborted_ || shutdown_sent_) return;  // the job is over: refuse further work
  const int before = negotiator_.ready_count();
  Status status = negotiator_.AddRequests(rank, requests);
  if (!status.ok()) {
    AbortLocked("protocol error: " + status.message());
    return;
  }
  NoteReadyLocked(before);
}

void Controller::HandleShutdownLocked(int rank) {
  if (aborted_ || shutdown_sent_ || negotiator_.table().has_shut_down(rank)) return;
  const int before = negotiator_.ready_count();
  negotiator_.AddShutdown(rank);
  logger_->info("rank {} sent its shutdown notice ({} of {})", rank,
                negotiator_.table().num_shut_down(), config_.size);
  if (!negotiator_.all_shut_down()) {
    NoteReadyLocked(before);
    return;
  }
  // Last notice: the failures it caused go out first, then Shutdown, in that order.
  Clock::TimePoint unused;
  PlanIfDueLocked(clock_->Now(), /*force=*/true, &unused);
  ControllerMessage shutdown;
  shutdown.kind = ControllerMessage::Kind::kShutdown;
  QueueLocked(-1, std::move(shutdown));
  shutdown_sent_ = true;
  logger_->info("every rank sent its shutdown notice; sent Shutdown");
}

void Controller::AbortLocked(const std::string& reason) {
  if (aborted_ || shutdown_sent_) return;  // the first root cause wins
  aborted_ = true;
  abort_reason_ = reason;
  negotiator_.DropReady();
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = reason;
  QueueLocked(-1, std::move(abort));
  logger_->error("job aborted: {}", reason);
}

void Controller::NoteReadyLocked(int ready_before) {
  if (ready_before == 0 && negotiator_.ready_count() > 0) {
    window_start_ = clock_->Now();
    wake_.notify_all();
  }
}

bool Controller::PlanIfDueLocked(Clock::TimePoint now, bool force, Clock::TimePoint* due) {
  if (negotiator_.ready_count() == 0) return true;
  *due = window_start_ + cycle_;
  if (!force && now < *due) return false;
  std::vector<Response> responses = negotiator_.Plan();
  LogBatch(logger_, responses);
  ControllerMessage batch;
  batch.kind = ControllerMessage::Kind::kResponses;
  batch.responses = std::move(responses);
  QueueLocked(-1, std::move(batch));
  return true;
}

void Controller::QueueLocked(int rank, ControllerMessage message) {
  outgoing_.push_back(Outgoing{rank, std::move(message)});
}

void Controller::Flush() {
  std::lock_guard<std::mutex> send_lock(send_mu_);
  if (outbox_ == nullptr) return;  // kept queued until Attach
  std::vector<Outgoing> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(outgoing_);
  }
  for (const Outgoing& out : batch) {
    if (out.rank >= 0) {
      outbox_->Send(out.rank, out.message);
      continue;
    }
    for (int rank = 0; rank < config_.size; ++rank) outbox_->Send(rank, out.message);
  }
}

std::optional<Clock::TimePoint> Controller::RunCycle() {
  Clock::TimePoint due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!PlanIfDueLocked(clock_->Now(), /*force=*/false, &due)) return due;
  }
  Flush();
  return std::nullopt;
}

void Controller::SequencerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (negotiator_.ready_count() == 0) {
      wake_.wait(lock);  // idle: no timer, no traffic
      continue;
    }
    const Clock::TimePoint now = clock_->Now();
    Clock::TimePoint due;
    if (!PlanIfDueLocked(now, /*force=*/false, &due)) {
      wake_.wait_for(lock, due - now);  // the fusion window: at most one cycle
      continue;
    }
    lock.unlock();
    Flush();
    lock.lock();
  }
}

bool Controller::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

std::string Controller::abort_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_reason_;
}

bool Controller::shutdown_sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_sent_;
}

}  // namespace kolo::controller
