#include "core/loop/background_loop.h"

#include <algorithm>
#include <exception>
#include <optional>

#include "core/check.h"
#include "core/clock.h"

namespace kolo {
namespace {

// True on every runtime's background thread (callbacks run there).
thread_local bool tls_is_background_thread = false;

// Bounds the background thread's sleep so deadlines are checked even when nothing arrives.
constexpr std::chrono::milliseconds kMaxIdleWait{200};

}  // namespace

Status BackgroundLoop::ShutDownBeforeCompletion() {
  return ShutdownError("kolo was shut down before this op completed");
}

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
      clock_(config.clock != nullptr ? config.clock : SteadyClock::Get()),
      lane_(lane),
      fast_(lane == nullptr
                ? nullptr
                : std::make_unique<FastPath>(
                      FastPath::Config{config.rank, config.size, config.fusion_threshold_bytes,
                                       config.divert_after_seconds, config.timeout_seconds},
                      config.negotiation_sink)) {}

BackgroundLoop::~BackgroundLoop() {
  Stop().IgnoreError(); /* reported by an explicit Stop */
}

void BackgroundLoop::Start() {
  {
    MutexLock lock(&tasks_mu_);
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
  MutexLock lock(&tasks_mu_);
  if (!accepting_tasks_) {
    lock.Unlock();
    item->fn();
    return Status::Ok();
  }
  tasks_.push_back(item);
  wakeup_->Notify();
  // Real time: the caller's thread waits, whatever clock the loop keeps its deadlines by.
  const auto limit = std::chrono::duration<double>(config_.timeout_seconds);
  if (task_done_.WaitFor(&tasks_mu_, limit,
                         [&]() KOLO_REQUIRES(tasks_mu_) { return item->done; })) {
    return Status::Ok();
  }
  // Withdraw the task if the loop has not taken it, so it never runs after we returned (it
  // may refer to the caller's stack); if the loop has taken it, it is running and short, so
  // this wait is bounded by the task itself.
  auto it = std::find(tasks_.begin(), tasks_.end(), item);
  if (it == tasks_.end()) {
    task_done_.Wait(&tasks_mu_, [&]() KOLO_REQUIRES(tasks_mu_) { return item->done; });
    return Status::Ok();
  }
  tasks_.erase(it);
  return DeadlineExceeded("the background thread did not get to the request within " +
                          SecondsText(config_.timeout_seconds) + " (KOLO_TIMEOUT_SECONDS)");
}

Status BackgroundLoop::RunWithDataPlane(const std::function<void()>& task) {
  if (IsBackgroundThread()) {
    return FailedPrecondition("this call may not be made from a kolo callback");
  }
  MutexLock lock(&loop_mu_);
  task();
  return Status::Ok();
}

bool BackgroundLoop::Drive(const std::function<bool()>& done, std::chrono::microseconds budget) {
  if (budget <= std::chrono::microseconds::zero() || IsBackgroundThread()) return false;
  // Only for the caller's own op: another op's callback should not run on a thread that may
  // hold the application's locks around this call. (An op another thread enqueues while this
  // one drives can still complete here; the loop stops driving at the next pass.)
  if (queue_->InFlight() != 1 || !loop_mu_.TryLock()) return false;
  const auto until = std::chrono::steady_clock::now() + budget;  // real time, as a spin's
  // The peers' round messages are read here now: they must not wake the sleeping thread,
  // which would take the core this one runs on only to wait for loop_mu_.
  MuteRounds();
  SetBackgroundThread(true);
  drive_done_ = &done;
  bool finished = false;
  try {
    while (state_ == LoopState::kRunning && !stop_requested_ && !(finished = done()) &&
           std::chrono::steady_clock::now() < until && queue_->InFlight() == 1) {
      Pass();
    }
    finished = done();
  } catch (const std::exception& e) {
    Abort(Internal(std::string("background loop failed on a driving caller: ") + e.what()),
          TellController::kYes);
  } catch (...) {
    Abort(Internal("background loop failed on a driving caller with an unknown exception"),
          TellController::kYes);
  }
  drive_done_ = nullptr;
  SetBackgroundThread(false);
  bool carry_on = !finished || state_ != LoopState::kRunning;
  // The sleeping thread's wait covers the rounds again, unless the rank is quiet; a round
  // message that arrived since the last pass wakes it now.
  if (RoundsMustWake() && !WakeForRounds()) carry_on = true;
  loop_mu_.Unlock();
  if (carry_on) wakeup_->Notify();  // the background thread carries on from here
  return true;
}

void BackgroundLoop::RunTasks() {
  std::vector<std::shared_ptr<Task>> tasks;
  {
    MutexLock lock(&tasks_mu_);
    tasks.swap(tasks_);
  }
  if (tasks.empty()) return;
  for (const auto& task : tasks) task->fn();
  {
    MutexLock lock(&tasks_mu_);
    for (const auto& task : tasks) task->done = true;
  }
  task_done_.NotifyAll();
}

bool BackgroundLoop::IsBackgroundThread() {
  return tls_is_background_thread;
}

void BackgroundLoop::SetBackgroundThread(bool on) {
  tls_is_background_thread = on;
}

Status BackgroundLoop::Stop() {
  if (IsBackgroundThread()) {
    return FailedPrecondition(
        "shutdown() was called from a kolo callback; call it from your own thread");
  }
  if (stop_called_) return Status::Ok();
  stop_called_ = true;
  queue_->Close(ShutdownError("kolo is shut down; no new ops are accepted"));
  stop_requested_ = true;
  wakeup_->Notify();
  if (thread_.joinable()) thread_.join();
  return final_status_;
}

void BackgroundLoop::Run() {
  SetBackgroundThread(true);
  // Third-party code (gRPC, protobuf, user callbacks) may throw; nothing may escape the thread.
  try {
    RunLoop();
  } catch (const std::exception& e) {
    MutexLock lock(&loop_mu_);
    Abort(Internal(std::string("background thread failed: ") + e.what()), TellController::kYes);
  } catch (...) {
    MutexLock lock(&loop_mu_);
    Abort(Internal("background thread failed with an unknown exception"), TellController::kYes);
  }
  // Tasks handed over from now on run on their caller's thread; the ones already handed over
  // still run here.
  {
    MutexLock lock(&tasks_mu_);
    accepting_tasks_ = false;
  }
  MutexLock lock(&loop_mu_);
  RunTasks();
}

void BackgroundLoop::RunLoop() {
  MutexLock lock(&loop_mu_);
  SendClockPing();
  while (state_ != LoopState::kDone) {
    Clock::TimePoint wake_by = clock_->Now() + kMaxIdleWait;
    if (state_ == LoopState::kDraining) wake_by = std::min(wake_by, stop_deadline_);
    const bool rounds = fast_path_on() && serving();
    const std::vector<int> fds = rounds ? lane_->fds() : std::vector<int>{};
    bool sleep = true;
    if (RoundsMustWake()) {     // implies `rounds`
      sleep = WakeForRounds();  // false: a round message is in already
    } else if (rounds) {
      MuteRounds();  // quiet: the peers' rounds wait for this rank's next op or pass
    }
    if (sleep) {
      lock.Unlock();  // while this thread sleeps, a blocking caller may Drive() the loop
      Sleep(wake_by, fds);
      lock.Lock();
      if (rounds) lane_->Woken();
    }
    Pass();
  }
}

bool BackgroundLoop::RoundsMustWake() {
  if (!fast_path_on() || !serving()) return false;
  return state_ != LoopState::kRunning || stop_requested_ || queue_->InFlight() > 0 ||
         !fast_->Quiet();
}

bool BackgroundLoop::WakeForRounds() {
  if (lane_->wakes_only_when_armed()) return lane_->Arm();
  if (rounds_muted_) {
    wakeup_->Unmute();
    rounds_muted_ = false;
  }
  return true;
}

void BackgroundLoop::MuteRounds() {
  if (!fast_path_on() || lane_->wakes_only_when_armed() || rounds_muted_) return;
  wakeup_->Mute();
  rounds_muted_ = true;
}

void BackgroundLoop::Pass() {
  DrainControl();
  DrainAsyncFailures();
  RunTasks();
  if (state_ == LoopState::kAborted && stop_requested_) Finish();
  if (!serving()) return;
  // Read the flag before draining the queue: Stop() closes the queue before it sets the
  // flag, so every op enqueued before a stop we see here is sent ahead of the notice (the
  // controller refuses announcements after a rank's notice).
  if (state_ == LoopState::kRunning && stop_requested_) {
    MoveTo(LoopState::kStopRequested);
    if (fast_path_on()) fast_->SetStopping();
  }
  SendNewRequests();
  if (fast_path_on()) StepRounds();
  SendKeepalive();
  AdvanceLife();
}

void BackgroundLoop::AdvanceLife() {
  switch (state_) {
    case LoopState::kStopRequested:
      // With the fast path, the notice waits until this rank's stopping round went out and
      // nothing waits for a round any more: the job-wide Shutdown it leads to lets peers leave.
      if (!fast_path_on() || fast_->Settled()) SendStopNotice();
      return;
    case LoopState::kDraining:
      if (clock_->Now() < stop_deadline_) return;
      final_status_ = DeadlineExceeded("shutdown: not every rank called shutdown() within " +
                                       SecondsText(config_.timeout_seconds) +
                                       " (KOLO_TIMEOUT_SECONDS); leaving without them");
      logger_->warn("{}", final_status_.message());
      FailAll(ShutDownBeforeCompletion());
      Finish();
      return;
    case LoopState::kFinishing:
      // Every rank did call shutdown(); what is left to run is bounded by the fast path's own
      // deadlines.
      if (fast_->Done()) {
        FailAll(ShutDownBeforeCompletion());
        Finish();
      }
      return;
    default:
      return;
  }
}

void BackgroundLoop::MoveTo(LoopState next) {
  // A broken invariant of this file, not a runtime condition.
  KOLO_CHECK(LoopTransitionAllowed(state_, next))
      << "background loop: no transition from " << LoopStateName(state_) << " to "
      << LoopStateName(next);
  logger_->debug("background loop: {} -> {}", LoopStateName(state_), LoopStateName(next));
  state_ = next;
}

void BackgroundLoop::Sleep(Clock::TimePoint deadline, const std::vector<int>& fds) {
  const Clock::TimePoint::duration left =
      std::clamp<Clock::TimePoint::duration>(deadline - clock_->Now(), {}, kMaxIdleWait);
  wakeup_->WaitUntil(std::chrono::steady_clock::now() + left, fds);
}

void BackgroundLoop::Abort(const Status& why, TellController tell) {
  if (!serving()) return;
  MoveTo(LoopState::kAborted);
  final_status_ = why;
  logger_->error("job aborted: {}", why.message());
  queue_->Close(why);
  data_plane_->Interrupt(why);
  executor_->Interrupt(why);
  if (tell == TellController::kYes) {
    WorkerMessage notice;
    notice.kind = WorkerMessage::Kind::kAbort;
    notice.reason = why.message();
    // The stream may be what failed; the controller then learns of it from the stream's end.
    channel_->Send(notice).IgnoreError();
  }
  FailAll(why);
}

void BackgroundLoop::FailAll(const Status& why) {
  if (fast_path_on()) fast_->DropEntries();  // they point into the queue's table
  for (auto& entry : queue_->RemoveAll()) Complete(std::move(entry), why);
}

void BackgroundLoop::Complete(std::unique_ptr<TensorEntry> entry, const Status& status,
                              const Response* response) {
  if (entry == nullptr) return;
  // The clock is read for a traced op only (the op's path is a few thousand cycles; each
  // read ~55).
  const bool traced = tracer_ != nullptr && OpTracer::Opened(*entry);
  const Clock::TimePoint callback_start = traced ? clock_->Now() : Clock::TimePoint();
  if (entry->callback) {
    try {
      entry->callback(status);
    } catch (const std::exception& e) {
      logger_->error("callback of '{}' threw: {}", entry->meta.name, e.what());
    } catch (...) {
      logger_->error("callback of '{}' threw an unknown exception", entry->meta.name);
    }
  }
  if (traced) {
    tracer_->Completed(*entry, status, response, callback_start, clock_->Now());
  }
}

}  // namespace kolo
