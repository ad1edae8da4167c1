#include "core/loop/round_driver.h"

#include <utility>

namespace kolo {
namespace {

// See spin_for_rounds: a peer that has its tensor ready answers within one loopback transit.
constexpr std::chrono::microseconds kRoundSpin{60};

}  // namespace

RoundDriver::RoundDriver(const Options& options, TraceSink* negotiation_sink,
                         const Autotuner* autotuner, RoundLane* lane, ResponseRunner* runner,
                         ControllerSession* session, Wakeup* wakeup, const Clock* clock,
                         Logger logger, bool spin_for_rounds, BetweenPolls between_polls)
    : lane_(lane),
      runner_(runner),
      session_(session),
      wakeup_(wakeup),
      clock_(clock),
      logger_(std::move(logger)),
      spin_for_rounds_(spin_for_rounds),
      between_polls_(between_polls),
      fast_(options, &runner->cache(), negotiation_sink, autotuner) {}

RoundDriver::Step RoundDriver::StepOnce(const std::function<bool()>* done) {
  Step step;
  const Clock::TimePoint now = clock_->Now();
  step.fault = PollLane(now);
  if (!step.fault.ok()) return step;
  FastPath::Outbox out;
  const Status advanced = fast_.Advance(now, &out);
  step.fault = SendToController(out.to_controller);
  if (!step.fault.ok()) return step;
  if (!advanced.ok()) {
    step.fault = Fault::Here(advanced);
    return step;
  }
  for (const RoundSend& send : out.sends) {
    step.fault = Fault::InCollective(send.to < 0 ? lane_->SendToAll(send.message)
                                                 : lane_->SendTo(send.to, send.message));
    if (!step.fault.ok()) return step;
  }
  step.progress = out.progress;
  bool ran = false;
  step.fault = RunDecided(&ran);
  if (!step.fault.ok()) return step;
  if (ran) {
    step.progress = true;
    if (done != nullptr && (*done)()) {
      step.caller_done = true;
      return step;
    }
  }
  WorkerMessage released;  // held joins and removals, in their order
  released.kind = WorkerMessage::Kind::kRequests;
  while (TensorEntry* held = fast_.TakeReleased()) {
    released.requests.push_back(runner_->cache().RequestFor(*held));
  }
  if (!released.requests.empty()) step.fault = Fault::FromController(session_->Send(released));
  return step;
}

bool RoundDriver::SpinForAnswer() const {
  if (!spin_for_rounds_ || !fast_.waiting() ||
      clock_->Now() - fast_.waiting_since() >= kRoundSpin) {
    return false;
  }
  PauseBetweenPolls(between_polls_);
  return true;
}

Fault RoundDriver::CheckDeadlines() const {
  return Fault::InCollective(fast_.CheckDeadlines(clock_->Now()));
}

bool RoundDriver::WakeForRounds() {
  if (lane_->wakes_only_when_armed()) return lane_->Arm();
  if (muted_) {
    wakeup_->Unmute();
    muted_ = false;
  }
  return true;
}

void RoundDriver::MuteRounds() {
  if (lane_->wakes_only_when_armed() || muted_) return;
  wakeup_->Mute();
  muted_ = true;
}

Fault RoundDriver::PollLane(Clock::TimePoint now) {
  std::vector<std::pair<int, RoundMessage>> messages;
  std::vector<int> closed;
  Status polled = lane_->Poll(&messages, &closed);
  for (auto& [from, message] : messages) {
    if (!polled.ok()) break;
    polled = fast_.ReceiveRound(from, std::move(message), now);
  }
  if (!polled.ok()) return Fault::InCollective(polled);
  for (int r : closed) fast_.PeerClosed(r);
  return Fault();
}

Fault RoundDriver::SendToController(const std::vector<uint32_t>& cache_ids) {
  if (cache_ids.empty()) return Fault();
  WorkerMessage batch;
  batch.kind = WorkerMessage::Kind::kRequests;
  for (uint32_t id : cache_ids) {
    Request request;
    request.cache_id = id;
    batch.requests.push_back(request);
  }
  logger_->debug("fast path: {} cached tensor(s) go to the controller", cache_ids.size());
  return Fault::FromController(session_->Send(batch));
}

Fault RoundDriver::RunDecided(bool* ran) {
  for (;;) {
    FastPath::Work& work = work_;
    if (!fast_.NextWork(clock_->Now(), &work)) return Fault();
    *ran = true;
    Fault fault = work.from_controller ? runner_->RunControllerResponse(work.response)
                                       : runner_->RunRoundWork(work);
    if (!fault.ok()) return fault;
  }
}

}  // namespace kolo
