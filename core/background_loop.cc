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
    const bool rounds_settled =
        !gating() || (!rounds_.waiting() && last_sent_.stopping && hits_.empty());
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

void BackgroundLoop::HandleResponse(const Response& response) {
  if (response.seq != last_seq_ + 1) {
    Abort(Internal("protocol error: response " + std::to_string(response.seq) + " arrived after " +
                   std::to_string(last_seq_)),
          true);
    return;
  }
  last_seq_ = response.seq;
  std::vector<TensorEntry*> entries;
  entries.reserve(response.names.size());
  for (const std::string& name : response.names) {
    TensorEntry* entry = queue_->Find(name);
    if (entry == nullptr && response.is_error()) {
      continue;  // an op that failed before this rank submitted it (e.g. a peer shut down)
    }
    if (entry == nullptr && joined_ && response.op == OpType::kAllreduce) {
      entry = StandIn(response, entries.size());  // this rank joined: it contributes zeros
    }
    if (entry == nullptr) {
      Abort(Internal("protocol error: the controller decided on '" + name +
                     "', which this rank never submitted"),
            true);
      return;
    }
    entries.push_back(entry);
  }
  if (response.is_error()) {
    for (const std::string& name : response.names) {
      auto slot = cache_.find(name);
      if (slot != cache_.end()) diverted_.erase(slot->second.id);  // this instance is over
    }
  } else {
    RememberCacheIds(response, entries);
  }
  RunResponse(response, std::move(entries), true);
}

void BackgroundLoop::RememberCacheIds(const Response& response,
                                      const std::vector<TensorEntry*>& entries) {
  // The controller's cache id for each name, as of this response; 0 retires the old one.
  for (size_t i = 0; i < response.names.size() && i < entries.size(); ++i) {
    const std::string& name = response.names[i];
    auto old = cache_.find(name);
    if (old != cache_.end()) {
      diverted_.erase(old->second.id);  // this instance ran: the next may take the fast path
    }
    uint32_t id = i < response.cache_ids.size() ? response.cache_ids[i] : 0;
    if (old != cache_.end() && old->second.id != id) specs_.erase(old->second.id);
    if (id == 0) {
      cache_.erase(name);
      continue;
    }
    cache_[name] = CacheSlot{id, entries[i]->meta};
    if (response.op == OpType::kAllreduce && entries[i]->meta.group.empty()) {
      specs_[id] = FastSpec{name,
                            response.dtype,
                            response.reduce_op,
                            response.prescale,
                            response.postscale,
                            i < response.num_elements.size() ? response.num_elements[i] : 0};
    }
  }
}

void BackgroundLoop::RunResponse(const Response& response, std::vector<TensorEntry*> entries,
                                 bool controller) {
  if (tracer_ != nullptr) tracer_->Taken(entries, SteadyTime::now());
  // An error response must never reach a callback as OK, whatever code it carries.
  const StatusCode code =
      response.error_code == StatusCode::kOk ? StatusCode::kMismatch : response.error_code;
  Status status = response.is_error() ? Status(code, response.error) : Status::Ok();
  if (!response.is_error() && !entries.empty()) {
    std::optional<OpTracer::Phases> phases;
    if (tracer_ != nullptr) phases.emplace(*tracer_, entries);
    status = executor_->Execute(response, entries, phases ? &*phases : nullptr);
    if (!status.ok()) {
      stand_ins_.clear();
      stand_in_data_.clear();
      Abort(RootCause(status), true);  // also fails these entries with the root cause
      return;
    }
  }
  // A name this rank ran with zeros is not its own: an entry of that name in the queue (the
  // next one, enqueued since) must stay there.
  std::vector<std::string> zero_names;
  for (const auto& stand_in : stand_ins_) zero_names.push_back(stand_in->meta.name);
  stand_ins_.clear();
  stand_in_data_.clear();
  if (controller && response.op == OpType::kJoin && !response.is_error()) {
    joined_ = false;
    for (TensorEntry* e : entries) {
      if (e->last_joined != nullptr) *e->last_joined = response.root;
    }
  }
  // Removing only now keeps each name in flight until its result is in place; Complete
  // skips names this rank never submitted.
  for (const std::string& name : response.names) {
    if (std::find(zero_names.begin(), zero_names.end(), name) != zero_names.end()) continue;
    std::unique_ptr<TensorEntry> entry = queue_->Remove(name);
    if (entry != nullptr && !entry->local_error.ok()) {
      const Status local = entry->local_error;
      Complete(std::move(entry), local, &response);
    } else {
      Complete(std::move(entry), status, &response);
    }
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

TensorEntry* BackgroundLoop::StandIn(const Response& response, size_t index) {
  const int64_t count = index < response.num_elements.size() ? response.num_elements[index] : 0;
  stand_in_data_.emplace_back(static_cast<size_t>(count) * DataTypeSize(response.dtype), 0);
  auto entry = std::make_unique<TensorEntry>();
  entry->meta.name = response.names[index];
  entry->meta.dtype = response.dtype;
  entry->meta.shape = {count};
  entry->input = {stand_in_data_.back().data(), response.dtype, {count}, Device::Cpu()};
  entry->output = entry->input;
  stand_ins_.push_back(std::move(entry));
  return stand_ins_.back().get();
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
