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
                         Logger logger, bool spin_for_rounds, BetweenPolls between_polls,
                         RoundStager stager)
    : lane_(lane),
      runner_(runner),
      session_(session),
      wakeup_(wakeup),
      clock_(clock),
      logger_(std::move(logger)),
      spin_for_rounds_(spin_for_rounds),
      between_polls_(between_polls),
      // KOLO_EAGER_BYTES unset: inputs ride in the rounds over TCP (a data-plane exchange there
      // costs transits of tens of µs), not through shared memory, where moving 4 KiB in the
      // round message measured slower than the slot path (docs/PERFORMANCE.md, "Where a small
      // op's time goes").
      fast_(options, &runner->cache(), negotiation_sink, autotuner, lane->shared_memory(),
            std::move(stager)) {}

RoundDriver::Step RoundDriver::StepOnce(const std::function<bool()>* done) {
  Step step;
  const Clock::TimePoint now = clock_->Now();
  // A rank with no round open and news of its own (a caller's new op) sends its round message
  // before it reads the lane: a peer's message already there is read right after, as if it had
  // arrived a moment later, and this rank's leaves one poll earlier (a small op's critical path).
  if (fast_.WantsRound()) {
    step.fault = AdvanceAndSend(now);
    if (!step.fault.ok()) return step;
    step.progress = out_.progress;
  }
  step.fault = PollLane(now);
  if (!step.fault.ok()) return step;
  step.fault = AdvanceAndSend(now);
  if (!step.fault.ok()) return step;
  step.progress = step.progress || out_.progress;
  bool ran = false;
  step.fault = RunDecided(now, &ran);
  if (!step.fault.ok()) return step;
  if (ran) {
    step.progress = true;
    if (done != nullptr && (*done)()) {
      step.caller_done = true;
      return step;
    }
  }
  TensorEntry* held = fast_.TakeReleased();
  if (held == nullptr) return step;  // the common case: nothing held back
  WorkerMessage released;            // held joins and removals, in their order
  released.kind = WorkerMessage::Kind::kRequests;
  for (; held != nullptr; held = fast_.TakeReleased()) {
    released.requests.push_back(runner_->cache().RequestFor(*held));
  }
  step.fault = Fault::FromController(session_->Send(released));
  return step;
}

Fault RoundDriver::AdvanceAndSend(Clock::TimePoint now) {
  FastPath::Outbox& out = out_;  // its buffers reused from step to step
  out.to_controller.clear();
  out.round.reset();
  out.sends.clear();
  out.progress = false;
  const Status advanced = fast_.Advance(now, &out);
  Fault fault = SendToController(out.to_controller);
  if (!fault.ok()) return fault;
  if (!advanced.ok()) return Fault::Here(advanced);
  for (const RoundSend& send : out.sends) {
    fault = Fault::InCollective(send.to < 0 ? lane_->SendToAll(send.message)
                                            : lane_->SendTo(send.to, send.message));
    if (!fault.ok()) return fault;
  }
  return Fault();
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
  // Buffers reused from poll to poll: a round's wait polls many times.
  std::vector<std::pair<int, RoundMessage>>& messages = polled_;
  std::vector<int>& closed = closed_peers_;
  messages.clear();
  closed.clear();
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

Fault RoundDriver::RunDecided(Clock::TimePoint now, bool* ran) {
  for (bool first = true;; first = false) {
    FastPath::Work& work = work_;
    // The step's time serves the first look (only a blocked order reads it: when it blocked);
    // after work ran, which may have taken a while, the clock is read again.
    if (!fast_.NextWork(first ? now : clock_->Now(), &work)) return Fault();
    *ran = true;
    Fault fault = work.from_controller ? runner_->RunControllerResponse(work.response)
                                       : runner_->RunRoundWork(work);
    if (!fault.ok()) return fault;
  }
}

}  // namespace kolo
