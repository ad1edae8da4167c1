// The background loop's thread and who does its work: Start and Stop, the thread's sleep and
// wake-up, a blocking caller that drives the loop (Drive), and the loop lent to a caller
// (RunOnLoop, RunWithDataPlane). The pass itself is in background_loop_pass.cc.
#include "core/loop/background_loop.h"

#include <sched.h>

#include <algorithm>
#include <exception>
#include <string>

#include "core/loop/callback_thread.h"

namespace kolo {

namespace {

// A lone allreduce's input goes into the data plane before its round message (the executor's
// Stage, on the loop's thread; docs/FAST-PATH.md, "Staged inputs").
RoundStager StagerOf(Executor* executor) {
  if (executor == nullptr) return nullptr;
  return [executor](const OpSignature& op, const TensorEntry& entry) {
    return executor->StageInput(op, entry);
  };
}

}  // namespace

BackgroundLoop::BackgroundLoop(const Options& options, Wiring wiring, TensorQueue* queue,
                               Wakeup* wakeup, ControlChannel* channel, Executor* executor,
                               DataPlane* data_plane, OpTracer* tracer, Logger logger,
                               RoundLane* lane)
    : options_(options),
      queue_(queue),
      wakeup_(wakeup),
      logger_(std::move(logger)),
      clock_(wiring.clock != nullptr ? wiring.clock : SteadyClock::Get()),
      between_polls_(wiring.between_polls),
      tasks_(wakeup),
      completer_(queue, tracer, clock_, logger_),
      session_(
          ControllerSession::Config{options.timeout_seconds, std::move(wiring.on_clock_offset)},
          channel, clock_),
      async_(executor, &completer_, tracer, wakeup, clock_, options.timeout_seconds, logger_),
      runner_(ResponseRunner::Config{wiring.process_sets, std::move(wiring.set_executor),
                                     std::move(wiring.set_removed), wiring.autotuner},
              queue, executor, &completer_, &async_, tracer, clock_, options.size,
              /*fast_path=*/lane != nullptr),
      rounds_(lane == nullptr
                  ? nullptr
                  : std::make_unique<RoundDriver>(options, wiring.negotiation_sink,
                                                  wiring.autotuner, lane, &runner_, &session_,
                                                  wakeup, clock_, logger_, wiring.spin_for_rounds,
                                                  wiring.between_polls, StagerOf(executor))),
      life_(options,
            LoopLife::Parts{queue, wakeup, executor, data_plane, clock_, &session_, &async_,
                            &completer_, rounds_.get()},
            logger_) {}

BackgroundLoop::~BackgroundLoop() {
  Stop().IgnoreError(); /* reported by an explicit Stop */
}

void BackgroundLoop::Start() {
  tasks_.Open();
  thread_ = std::thread([this] { Run(); });
}

Status BackgroundLoop::RunOnLoop(std::function<void()> task) {
  if (IsBackgroundThread()) {
    return FailedPrecondition("this call may not be made from a kolo callback");
  }
  return tasks_.Hand(std::move(task), options_.timeout_seconds);
}

bool BackgroundLoop::AbortJob(const Status& why) {
  // Run by RunPending, under loop_mu_, on whichever thread does the loop's work.
  return tasks_.Post([this, why]()
                         KOLO_REQUIRES(loop_mu_) { life_.AbortOn(Fault::Requested(why)); });
}

Status BackgroundLoop::RunWithDataPlane(const std::function<void()>& task) {
  if (IsBackgroundThread()) {
    return FailedPrecondition("this call may not be made from a kolo callback");
  }
  MutexLock lock(&loop_mu_);
  CallerWaitScope caller_waits;
  task();
  return Status::Ok();
}

bool BackgroundLoop::Drive(const std::function<bool()>& done, std::chrono::microseconds budget) {
  if (budget <= std::chrono::microseconds::zero() || IsBackgroundThread()) return false;
  // Only for the caller's own op: another op's callback should not run on a thread that may
  // hold the application's locks around this call. (An op another thread enqueues while this
  // one drives can still complete here; the loop stops driving at the next pass.)
  if (queue_->InFlight() != 1) return false;
  if (!loop_mu_.TryLock()) return false;
  PollBudget left(budget, between_polls_);  // time on the core, where it keeps the core
  // The peers' round messages are read here now: they must not wake the sleeping thread,
  // which would take the core this one runs on only to wait for loop_mu_.
  if (rounds_ != nullptr) rounds_->MuteRounds();
  bool finished = false;
  {
    CallbackThreadScope callbacks;
    CallerWaitScope caller_waits;  // the data plane's waits poll for their whole budget here
    life_.set_driving(&done);
    try {
      while (life_.state() == LoopState::kRunning && !stop_requested_ && !(finished = done()) &&
             !left.Spent() && queue_->InFlight() == 1) {
        Pass();
        // Past the round's own poll (RoundDriver::SpinForAnswer) a pass returns at once. Where
        // the ranks outnumber the cores the core goes to whoever wants it between passes
        // (without that the caller kept the core its peers needed to answer until its budget
        // ran out); where each has a core, the caller keeps it: a yield handed it to a busy
        // host's other processes for a time slice each (docs/PERFORMANCE.md, "On a busy
        // machine").
        if (!done()) PauseBetweenPolls(between_polls_);
      }
      finished = done();
    } catch (const std::exception& e) {
      life_.AbortOn(Fault::Here(
          Internal(std::string("background loop failed on a driving caller: ") + e.what())));
    } catch (...) {
      life_.AbortOn(
          Fault::Here(Internal("background loop failed on a driving caller with an unknown "
                               "exception")));
    }
    life_.set_driving(nullptr);
  }
  bool carry_on = !finished || life_.state() != LoopState::kRunning;
  // The sleeping thread's wait covers the rounds again, unless the rank is quiet; a round
  // message that arrived since the last pass wakes it now.
  if (RoundsMustWake() && !rounds_->WakeForRounds()) carry_on = true;
  loop_mu_.Unlock();
  if (carry_on) wakeup_->Notify();  // the background thread carries on from here
  return true;
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
  MutexLock lock(&loop_mu_);
  return life_.final_status();
}

void BackgroundLoop::Run() {
  CallbackThreadScope callbacks;  // the whole thread
  // Third-party code (gRPC, protobuf, user callbacks) may throw; nothing may escape the thread.
  try {
    RunLoop();
  } catch (const std::exception& e) {
    MutexLock lock(&loop_mu_);
    life_.AbortOn(Fault::Here(Internal(std::string("background thread failed: ") + e.what())));
  } catch (...) {
    MutexLock lock(&loop_mu_);
    life_.AbortOn(Fault::Here(Internal("background thread failed with an unknown exception")));
  }
  // Tasks handed over from now on run on their caller's thread; the ones already handed over
  // still run here.
  tasks_.Close();
  MutexLock lock(&loop_mu_);
  tasks_.RunPending();
}

void BackgroundLoop::RunLoop() {
  MutexLock lock(&loop_mu_);
  session_.SendClockPing();
  while (life_.state() != LoopState::kDone) {
    Clock::TimePoint wake_by = clock_->Now() + kMaxIdleWait;
    if (life_.state() == LoopState::kDraining) wake_by = std::min(wake_by, life_.stop_deadline());
    const bool rounds = rounds_ != nullptr && life_.serving();
    const std::vector<int> fds = rounds ? rounds_->fds() : std::vector<int>{};
    bool sleep = true;
    if (RoundsMustWake()) {              // implies `rounds`
      sleep = rounds_->WakeForRounds();  // false: a round message is in already
    } else if (rounds) {
      rounds_->MuteRounds();  // quiet: the peers' rounds wait for this rank's next op or pass
    }
    if (sleep) {
      lock.Unlock();  // while this thread sleeps, a blocking caller may Drive() the loop
      SleepUntil(wakeup_, clock_, wake_by, fds);
      lock.Lock();
      if (rounds) rounds_->Woken();
    }
    Pass();
  }
}

bool BackgroundLoop::RoundsMustWake() {
  if (rounds_ == nullptr || !life_.serving()) return false;
  return life_.state() != LoopState::kRunning || stop_requested_ || queue_->InFlight() > 0 ||
         !rounds_->fast().Quiet();
}

}  // namespace kolo
