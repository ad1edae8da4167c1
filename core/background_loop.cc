#include "core/background_loop.h"

#include <algorithm>
#include <exception>
#include <optional>

#include "core/clock.h"

namespace kolo {
namespace {

using SteadyTime = std::chrono::steady_clock;

// True on every runtime's background thread (callbacks run there).
thread_local bool tls_is_background_thread = false;

// Bounds the background thread's sleep so deadlines are checked even when nothing arrives.
constexpr std::chrono::milliseconds kMaxIdleWait{200};

// The control stream broke while the job ran: the controller (rank 0's process) is gone or
// unreachable. Said first, so that it is not mistaken for one more lost peer.
Status ControllerLost(const Status& stream_error) {
  return stream_error.WithContext("controller lost");
}

}  // namespace

BackgroundLoop::BackgroundLoop(const Config& config, TensorQueue* queue, Wakeup* wakeup,
                               ControlChannel* channel, Executor* executor, DataPlane* data_plane,
                               OpTracer* tracer, Logger logger, RoundLane* lane)
    : config_(config),
      queue_(queue),
      wakeup_(wakeup),
      channel_(channel),
      executor_(executor),
      data_plane_(data_plane),
      tracer_(tracer),
      logger_(std::move(logger)),
      lane_(lane),
      rounds_(config.rank, config.size),
      round_trace_(config.negotiation_sink, config.size),
      lane_closed_(config.size, false),
      peer_stopping_(config.size, false) {}

BackgroundLoop::~BackgroundLoop() {
  Stop().IgnoreError(); /* reported by an explicit Stop */
}

void BackgroundLoop::Start() {
  {
    std::lock_guard<std::mutex> lock(tasks_mu_);
    accepting_tasks_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

Status BackgroundLoop::RunOnLoop(std::function<void()> task) {
  if (IsBackgroundThread()) {
    return FailedPrecondition("this call may not be made from a kolo callback");
  }
  auto item = std::make_shared<Task>();
  item->fn = std::move(task);
  std::unique_lock<std::mutex> lock(tasks_mu_);
  if (!accepting_tasks_) {
    lock.unlock();
    item->fn();
    return Status::Ok();
  }
  tasks_.push_back(item);
  wakeup_->Notify();
  const auto limit = std::chrono::duration<double>(config_.timeout_seconds);
  if (task_done_.wait_for(lock, limit, [&] { return item->done; })) return Status::Ok();
  // Withdraw the task if the loop has not taken it, so it never runs after we returned (it
  // may refer to the caller's stack); if the loop has taken it, it is running and short.
  auto it = std::find(tasks_.begin(), tasks_.end(), item);
  if (it == tasks_.end()) {
    task_done_.wait(lock, [&] { return item->done; });
    return Status::Ok();
  }
  tasks_.erase(it);
  return DeadlineExceeded("the background thread did not get to the request within " +
                          SecondsText(config_.timeout_seconds) + " (KOLO_TIMEOUT_SECONDS)");
}

void BackgroundLoop::RunTasks() {
  std::vector<std::shared_ptr<Task>> tasks;
  {
    std::lock_guard<std::mutex> lock(tasks_mu_);
    tasks.swap(tasks_);
  }
  if (tasks.empty()) return;
  for (const auto& task : tasks) task->fn();
  {
    std::lock_guard<std::mutex> lock(tasks_mu_);
    for (const auto& task : tasks) task->done = true;
  }
  task_done_.notify_all();
}

bool BackgroundLoop::IsBackgroundThread() {
  return tls_is_background_thread;
}

Status BackgroundLoop::Stop() {
  if (IsBackgroundThread()) {
    return FailedPrecondition(
        "shutdown() was called from a kolo callback; call it from your own thread");
  }
  if (stopped_) return Status::Ok();
  stopped_ = true;
  queue_->Close(ShutdownError("kolo is shut down; no new ops are accepted"));
  stop_requested_ = true;
  wakeup_->Notify();
  if (thread_.joinable()) thread_.join();
  return final_status_;
}

void BackgroundLoop::Run() {
  tls_is_background_thread = true;
  // Third-party code (gRPC, protobuf, user callbacks) may throw; nothing may escape the thread.
  try {
    RunLoop();
  } catch (const std::exception& e) {
    Abort(Internal(std::string("background thread failed: ") + e.what()), true);
  } catch (...) {
    Abort(Internal("background thread failed with an unknown exception"), true);
  }
  // Tasks handed over from now on run on their caller's thread; the ones already handed over
  // still run here.
  {
    std::lock_guard<std::mutex> lock(tasks_mu_);
    accepting_tasks_ = false;
  }
  RunTasks();
}

void BackgroundLoop::RunLoop() {
  SendClockPing();
  while (state_ != State::kDone) {
    SteadyTime::time_point wake_by = SteadyTime::now() + kMaxIdleWait;
    if (notice_sent_ && stop_deadline_ < wake_by) wake_by = stop_deadline_;
    wakeup_->WaitUntil(wake_by,
                       gating() && state_ == State::kRunning ? lane_->fds() : std::vector<int>{});
    DrainControl();
    RunTasks();
    if (state_ == State::kDone) break;
    if (state_ == State::kAborted) {
      if (stop_requested_) state_ = State::kDone;
      continue;
    }
    // Read the flag before draining the queue: Stop() closes the queue before it sets the
    // flag, so every op enqueued before a stop we see here is sent ahead of the notice (the
    // controller refuses announcements after a rank's notice).
    const bool stopping = stop_requested_;
    if (stopping) stopping_ = true;
    SendNewRequests();
    if (gating()) StepRounds();
    SendKeepalive();
    // With the fast path, the notice waits until this rank's stopping round went out and
    // nothing waits for a round any more: the job-wide Shutdown it leads to lets peers leave.
    const bool rounds_settled = !gating() || (!rounds_.waiting() && last_sent_.stopping &&
                                              hits_.empty() && held_join_ == nullptr);
    if (stopping && !notice_sent_ && state_ == State::kRunning && rounds_settled) {
      WorkerMessage notice;
      notice.kind = WorkerMessage::Kind::kShutdown;
      Status sent = channel_->Send(notice);
      if (!sent.ok()) {
        Abort(ControllerLost(sent), false);
        continue;
      }
      notice_sent_ = true;
      stop_deadline_ =
          SteadyTime::now() + std::chrono::duration_cast<SteadyTime::duration>(
                                  std::chrono::duration<double>(config_.timeout_seconds));
    }
    // Once the job-wide Shutdown came every rank did call shutdown(); what is left to run is
    // bounded by the fast path's own deadlines.
    if (notice_sent_ && state_ == State::kRunning && !shutdown_received_ &&
        SteadyTime::now() >= stop_deadline_) {
      final_status_ = DeadlineExceeded("shutdown: not every rank called shutdown() within " +
                                       SecondsText(config_.timeout_seconds) +
                                       " (KOLO_TIMEOUT_SECONDS); leaving without them");
      logger_->warn("{}", final_status_.message());
      FailAll(ShutdownError("kolo was shut down before this op completed"));
      state_ = State::kDone;
    }
    if (shutdown_received_ && state_ == State::kRunning && FastPathDone()) {
      FailAll(ShutdownError("kolo was shut down before this op completed"));
      state_ = State::kDone;
    }
  }
}

void BackgroundLoop::DrainControl() {
  while (state_ != State::kDone) {
    StatusOr<std::optional<ControllerMessage>> next = channel_->TryReceive();
    if (!next.ok()) {
      if (state_ == State::kRunning) Abort(ControllerLost(next.status()), false);
      if (stop_requested_) state_ = State::kDone;
      return;
    }
    if (!next->has_value()) return;
    HandleMessage(**next);
  }
}

void BackgroundLoop::HandleMessage(const ControllerMessage& message) {
  switch (message.kind) {
    case ControllerMessage::Kind::kResponses:
      for (const Response& response : message.responses) {
        if (state_ != State::kRunning) return;
        if (!gating()) {
          HandleResponse(response);
          continue;
        }
        // Runs once a round has decided where it goes in the order (RunDecided).
        if (response.seq != received_seq_ + 1) {
          Abort(Internal("protocol error: response " + std::to_string(response.seq) +
                         " arrived after " + std::to_string(received_seq_)),
                true);
          return;
        }
        received_seq_ = response.seq;
        received_.push_back(response);
      }
      return;
    case ControllerMessage::Kind::kAbort:
      Abort(Aborted(message.reason), false);
      return;
    case ControllerMessage::Kind::kShutdown:
      logger_->debug("job-wide shutdown received");
      if (gating()) {
        shutdown_received_ = true;  // once every response received has run (RunLoop)
        return;
      }
      FailAll(ShutdownError("kolo was shut down before this op completed"));
      state_ = State::kDone;
      return;
    case ControllerMessage::Kind::kPong:
      HandlePong(message);
      return;
    case ControllerMessage::Kind::kWelcome:
      Abort(Internal("protocol error: a second Welcome from the controller"), true);
      return;
  }
}

namespace {
constexpr int kClockSamples = 5;

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void BackgroundLoop::SendClockPing() {
  if (!config_.on_clock_offset || state_ != State::kRunning) return;
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  ping.ping_unix_us = UnixMicros();
  // Best effort: a failed send shows up as a broken stream on the next receive.
  channel_->Send(ping).IgnoreError();
}

void BackgroundLoop::SendKeepalive() {
  const SteadyTime::time_point now = SteadyTime::now();
  if (state_ != State::kRunning ||
      now - last_keepalive_ < std::chrono::duration<double>(config_.timeout_seconds / 4)) {
    return;
  }
  last_keepalive_ = now;
  WorkerMessage ping;
  ping.kind = WorkerMessage::Kind::kPing;
  ping.ping_unix_us = 0;  // a keepalive: the controller does not answer
  // Best effort: a failed send shows up as a broken stream on the next receive.
  channel_->Send(ping).IgnoreError();
}

void BackgroundLoop::HandlePong(const ControllerMessage& pong) {
  if (!config_.on_clock_offset) return;
  const int64_t now = UnixMicros();
  const double rtt = static_cast<double>(now - pong.ping_unix_us);
  if (rtt >= 0 && (clock_samples_ == 0 || rtt < best_clock_rtt_us_)) {
    best_clock_rtt_us_ = rtt;
    const double midpoint = (static_cast<double>(pong.ping_unix_us) + static_cast<double>(now)) / 2;
    config_.on_clock_offset(static_cast<double>(pong.controller_unix_us) - midpoint, rtt);
  }
  if (++clock_samples_ < kClockSamples) SendClockPing();
}

Request BackgroundLoop::MakeRequest(const TensorEntry& entry) {
  Request request;
  auto it = cache_.find(entry.meta.name);
  if (it != cache_.end() && it->second.meta == entry.meta) {
    request.cache_id = it->second.id;
  } else {
    request.meta = entry.meta;
  }
  return request;
}

void BackgroundLoop::SendNewRequests() {
  std::vector<TensorEntry*> fresh = queue_->TakeNew();
  if (fresh.empty()) return;
  WorkerMessage batch;
  batch.kind = WorkerMessage::Kind::kRequests;
  batch.requests.reserve(fresh.size());
  const SteadyTime::time_point now = SteadyTime::now();
  for (TensorEntry* entry : fresh) {
    if (entry->meta.op == OpType::kJoin) {
      joined_ = true;
      if (gating() && !hits_.empty()) {
        // The cached allreduces this rank submitted before it must run first, as they would
        // on the controller's stream: the join goes out once they have (StepRounds).
        held_join_ = entry;
        continue;
      }
    }
    Request request = MakeRequest(*entry);
    if (TakesFastPath(*entry, request)) {
      hits_[request.cache_id] = Hit{entry, now, false};
      round_trace_.Ready(config_.rank, request.cache_id, entry->meta.name, now);
      continue;
    }
    if (request.cache_id == 0 && gating()) {
      // Its metadata changed: the peers' cached copies must meet it at the controller (which
      // names the mismatch) instead of waiting for a round.
      auto slot = cache_.find(entry->meta.name);
      if (slot != cache_.end() && specs_.count(slot->second.id) != 0) {
        diverted_.insert(slot->second.id);
        newly_diverted_.push_back(slot->second.id);
      }
    }
    batch.requests.push_back(std::move(request));
  }
  if (batch.requests.empty()) return;
  logger_->trace("sending {} requests", batch.requests.size());
  SendRequests(batch);
}

void BackgroundLoop::SendRequests(const WorkerMessage& batch) {
  if (batch.requests.empty()) return;
  Status sent = channel_->Send(batch);
  if (!sent.ok()) Abort(ControllerLost(sent), false);
}

Status BackgroundLoop::RootCause(const Status& local) {
  // A peer that closed its connection: the controller hears of it at once. A timeout: the
  // peer named may itself be waiting for a stopped rank further up the ring; the controller's
  // keepalive names the stopped one within a quarter timeout of ours (grpc_keepalive.h).
  const double grace = local.code() == StatusCode::kDeadlineExceeded
                           ? config_.timeout_seconds / 2
                           : std::min(config_.timeout_seconds / 4, 1.0);
  const SteadyTime::time_point until =
      SteadyTime::now() +
      std::chrono::duration_cast<SteadyTime::duration>(std::chrono::duration<double>(grace));
  for (;;) {
    StatusOr<std::optional<ControllerMessage>> next = channel_->TryReceive();
    if (!next.ok()) return ControllerLost(next.status());
    if (next->has_value()) {
      if ((*next)->kind == ControllerMessage::Kind::kAbort) return Aborted((*next)->reason);
      continue;  // responses after a failed one never run: the job aborts
    }
    if (SteadyTime::now() >= until) return local;
    wakeup_->WaitUntil(until);
  }
}

void BackgroundLoop::Abort(const Status& why, bool tell_controller) {
  if (state_ != State::kRunning) return;
  state_ = State::kAborted;
  final_status_ = why;
  logger_->error("job aborted: {}", why.message());
  queue_->Close(why);
  data_plane_->Interrupt(why);
  if (tell_controller) {
    WorkerMessage notice;
    notice.kind = WorkerMessage::Kind::kAbort;
    notice.reason = why.message();
    // The stream may be what failed; the controller then learns of it from the stream's end.
    channel_->Send(notice).IgnoreError();
  }
  FailAll(why);
}

void BackgroundLoop::FailAll(const Status& why) {
  hits_.clear();  // they point into the queue's table
  held_join_ = nullptr;
  for (auto& entry : queue_->RemoveAll()) Complete(std::move(entry), why);
}

void BackgroundLoop::Complete(std::unique_ptr<TensorEntry> entry, const Status& status,
                              const Response* response) {
  if (entry == nullptr) return;
  const SteadyTime::time_point callback_start = SteadyTime::now();
  if (entry->callback) {
    try {
      entry->callback(status);
    } catch (const std::exception& e) {
      logger_->error("callback of '{}' threw: {}", entry->meta.name, e.what());
    } catch (...) {
      logger_->error("callback of '{}' threw an unknown exception", entry->meta.name);
    }
  }
  if (tracer_ != nullptr) {
    tracer_->Completed(*entry, status, response, callback_start, SteadyTime::now());
  }
}

}  // namespace kolo
