// The background loop's fast path (docs/FAST-PATH.md): cached allreduces agreed on in rounds
// over the RoundLane instead of through the controller, and the controller's responses run at
// the points the rounds decide. Loop thread only.
#include <sched.h>

#include <algorithm>

#include "core/background_loop.h"
#include "core/clock.h"

namespace kolo {
namespace {

using SteadyTime = std::chrono::steady_clock;

// See Config::busy_poll: a peer that has its tensor ready answers within one loopback transit.
constexpr std::chrono::microseconds kRoundSpin{60};

std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

bool BackgroundLoop::TakesFastPath(const TensorEntry& entry, const Request& request) const {
  return gating() && !stopping_ && !closed_ && request.cache_id != 0 &&
         entry.meta.op == OpType::kAllreduce && entry.meta.group.empty() &&
         entry.meta.device.is_cpu() && specs_.count(request.cache_id) != 0 &&
         diverted_.count(request.cache_id) == 0;
}

void BackgroundLoop::PollLane() {
  std::vector<std::pair<int, RoundMessage>> messages;
  std::vector<int> closed;
  Status polled = lane_->Poll(&messages, &closed);
  const SteadyTime::time_point now = SteadyTime::now();
  for (auto& [from, message] : messages) {
    if (!polled.ok()) break;
    peer_stopping_[from] = message.stopping;
    for (uint32_t id : message.ready) {
      auto spec = specs_.find(id);
      if (spec != specs_.end()) round_trace_.Ready(from, id, spec->second.name, now);
    }
    polled = rounds_.Receive(from, std::move(message));
  }
  if (!polled.ok()) {
    Abort(RootCause(polled), true);
    return;
  }
  // Its messages came before its end of stream: a peer that said `stopping` and then closed
  // left after shutdown() (e.g. it stopped waiting for the others); rounds go on without it.
  for (int r : closed) {
    lane_closed_[r] = true;
    if (peer_stopping_[r]) rounds_.Depart(r);
  }
}

void BackgroundLoop::StepRounds() {
  for (int pass = 0; state_ == State::kRunning; ++pass) {
    if (pass > 0) {  // what the previous pass ran may have taken a while
      DrainControl();
      RunTasks();
      if (state_ != State::kRunning) return;
    }
    PollLane();
    if (state_ != State::kRunning) return;
    bool progress = false;
    if (!rounds_.waiting()) DivertWaiting();
    if (rounds_.must_answer() || (!rounds_.waiting() && NeedRound())) {
      SendRound();
      progress = true;
    }
    while (state_ == State::kRunning) {
      std::optional<RoundDecision> decision = rounds_.TakeDecision();
      if (!decision) break;
      ApplyDecision(*decision);
      progress = true;
    }
    if (RunDecided()) progress = true;
    SendHeldJoin();
    if (!progress && !SpinForAnswer()) break;
  }
  CheckRoundDeadlines();
}

bool BackgroundLoop::SpinForAnswer() const {
  if (!config_.busy_poll || !rounds_.waiting() ||
      SteadyTime::now() - rounds_.waiting_since() >= kRoundSpin) {
    return false;
  }
  sched_yield();
  return true;
}

bool BackgroundLoop::NeedRound() const {
  if (received_seq_ > decided_seq_ || !newly_diverted_.empty()) return true;
  if (joined_ != last_sent_.joined || stopping_ != last_sent_.stopping) return true;
  return std::any_of(hits_.begin(), hits_.end(),
                     [](const auto& item) { return !item.second.announced; });
}

void BackgroundLoop::SendRound() {
  RoundMessage message;
  message.received_seq = received_seq_;
  message.joined = joined_;
  message.stopping = stopping_;
  message.fusion_threshold =
      static_cast<uint64_t>(std::max<int64_t>(config_.fusion_threshold_bytes, 0));
  message.ready.reserve(hits_.size());
  for (auto& [id, hit] : hits_) {
    message.ready.push_back(id);
    hit.announced = true;
  }
  std::sort(newly_diverted_.begin(), newly_diverted_.end());
  newly_diverted_.erase(std::unique(newly_diverted_.begin(), newly_diverted_.end()),
                        newly_diverted_.end());
  message.diverted.swap(newly_diverted_);
  rounds_.RecordSent(&message, SteadyTime::now());
  last_sent_ = message;
  Status sent = lane_->SendToAll(message);
  if (!sent.ok()) Abort(RootCause(sent), true);
}

// Sends to the controller what must not wait for a round any longer: everything once this
// rank or a peer is stopping, else what waited longer than divert_after_seconds for the other
// ranks (the controller's stall inspector then sees it and names who is late). Only between
// rounds: an id in this rank's open round message may still be decided runnable.
void BackgroundLoop::DivertWaiting() {
  if (hits_.empty()) return;
  const SteadyTime::time_point now = SteadyTime::now();
  const auto patience = std::chrono::duration<double>(config_.divert_after_seconds);
  WorkerMessage batch;
  batch.kind = WorkerMessage::Kind::kRequests;
  std::vector<uint32_t> ids;
  for (const auto& [id, hit] : hits_) {
    if (stopping_ || closed_ || now - hit.since >= patience) ids.push_back(id);
  }
  for (uint32_t id : ids) {
    logger_->debug("fast path: '{}' goes to the controller", specs_.at(id).name);
    Divert(id, &batch);
    newly_diverted_.push_back(id);
  }
  SendRequests(batch);
}

void BackgroundLoop::Divert(uint32_t id, WorkerMessage* batch) {
  diverted_.insert(id);
  auto hit = hits_.find(id);
  if (hit == hits_.end()) return;
  Request request;
  request.cache_id = id;
  batch->requests.push_back(request);
  hits_.erase(hit);
}

void BackgroundLoop::ApplyDecision(const RoundDecision& decision) {
  decided_seq_ = std::max(decided_seq_, decision.run_through_seq);
  if (decision.stopping) closed_ = true;
  const SteadyTime::time_point now = SteadyTime::now();
  for (const std::vector<uint32_t>* ids : {&decision.runnable, &decision.diverted}) {
    for (uint32_t id : *ids) {
      auto spec = specs_.find(id);
      if (spec != specs_.end()) {
        round_trace_.Closed(id, spec->second.name, ids == &decision.runnable, now);
      }
    }
  }
  WorkerMessage batch;
  batch.kind = WorkerMessage::Kind::kRequests;
  for (uint32_t id : decision.diverted) Divert(id, &batch);
  SendRequests(batch);
  if (state_ != State::kRunning) return;
  // What this rank runs for the round, taken out of hits_ now: nothing decided may be diverted
  // or reported ready again while it waits for earlier work (RunDecided).
  Decided decided{decision, {}};
  for (uint32_t id : decision.runnable) {
    const bool mine = std::binary_search(last_sent_.ready.begin(), last_sent_.ready.end(), id);
    auto hit = hits_.find(id);
    if (mine && hit == hits_.end()) {
      Abort(
          Internal("fast path: round " + std::to_string(decision.round) + " decided on cache id " +
                   std::to_string(id) + ", which this rank reported ready but no longer holds"),
          true);
      return;
    }
    if (!mine && (!last_sent_.joined || specs_.count(id) == 0)) {
      Abort(Internal("fast path: round " + std::to_string(decision.round) +
                     " decided on cache id " + std::to_string(id) +
                     ", which this rank neither reported ready nor can stand in for"),
            true);
      return;
    }
    decided.entries.push_back(mine ? hit->second.entry : nullptr);  // null: joined, zeros
    if (mine) hits_.erase(hit);
  }
  decided_.push_back(std::move(decided));
}

void BackgroundLoop::SendHeldJoin() {
  if (held_join_ == nullptr || !hits_.empty() || state_ != State::kRunning) return;
  WorkerMessage batch;
  batch.kind = WorkerMessage::Kind::kRequests;
  batch.requests.push_back(MakeRequest(*held_join_));
  held_join_ = nullptr;
  SendRequests(batch);
}

// Runs decided work in order until something is missing (a controller response not received
// yet). True if anything ran.
bool BackgroundLoop::RunDecided() {
  bool ran = false;
  while (!decided_.empty() && state_ == State::kRunning) {
    const Decided& front = decided_.front();
    while (last_seq_ < front.decision.run_through_seq && state_ == State::kRunning) {
      if (received_.empty()) {
        if (!blocked_) blocked_since_ = SteadyTime::now();
        blocked_ = true;
        return ran;
      }
      Response response = std::move(received_.front());
      received_.pop_front();
      HandleResponse(response);
      ran = true;
    }
    blocked_ = false;
    if (state_ != State::kRunning) return ran;
    Decided done = std::move(decided_.front());
    decided_.pop_front();
    if (!done.decision.runnable.empty()) {
      RunHits(done);
      ran = true;
    }
  }
  return ran;
}

// Runs the round's cached allreduces in ascending id order, fused under the controller's rule
// (consecutive ones with the same dtype, reduce op and scales, up to the round's threshold).
void BackgroundLoop::RunHits(const Decided& decided) {
  const RoundDecision& decision = decided.decision;
  const uint64_t threshold = decision.fusion_threshold;
  size_t i = 0;
  for (uint64_t index = 0; i < decision.runnable.size() && state_ == State::kRunning; ++index) {
    Response response;
    response.seq = 0;  // the fast path: no controller sequence number
    response.fast_round = decision.round;
    // Apart from controller sequence numbers and from each other (a round runs at most
    // KOLO_CACHE_CAPACITY <= 10^6 < 2^20 tensors), and below 2^53 so that JSON readers, whose
    // numbers are doubles, read it exactly (for the first 2^32 rounds).
    response.fast_group = (uint64_t{1} << 52) + (decision.round << 20) + index;
    std::vector<TensorEntry*> entries;
    uint64_t bytes = 0;
    for (; i < decision.runnable.size(); ++i) {
      const FastSpec& s = specs_.at(decision.runnable[i]);  // checked by ApplyDecision
      const uint64_t tensor_bytes =
          static_cast<uint64_t>(s.num_elements) * static_cast<uint64_t>(DataTypeSize(s.dtype));
      if (!entries.empty() &&
          (s.dtype != response.dtype || s.reduce_op != response.reduce_op ||
           s.prescale != response.prescale || s.postscale != response.postscale ||
           bytes + tensor_bytes > threshold)) {
        break;
      }
      if (entries.empty()) {
        response.dtype = s.dtype;
        response.reduce_op = s.reduce_op;
        response.prescale = s.prescale;
        response.postscale = s.postscale;
      }
      response.names.push_back(s.name);
      response.cache_ids.push_back(decision.runnable[i]);
      response.num_elements.push_back(s.num_elements);
      bytes += tensor_bytes;
      TensorEntry* entry = decided.entries[i];
      // Joined without it: this rank contributes zeros.
      entries.push_back(entry != nullptr ? entry : StandIn(response, entries.size()));
    }
    RunResponse(response, std::move(entries), false);
  }
}

void BackgroundLoop::CheckRoundDeadlines() {
  if (state_ != State::kRunning) return;
  const SteadyTime::time_point now = SteadyTime::now();
  const auto limit = std::chrono::duration<double>(config_.timeout_seconds);
  if (rounds_.waiting()) {
    const std::vector<int> missing = rounds_.missing();
    std::vector<int> gone;
    for (int r : missing) {
      if (lane_closed_[r]) gone.push_back(r);
    }
    const std::string round = "round " + std::to_string(rounds_.current_round());
    if (!gone.empty()) {
      Abort(RootCause(Unavailable("fast path: rank(s) " + RankList(gone) +
                                  " closed the connection before answering " + round)),
            true);
      return;
    }
    if (now - rounds_.waiting_since() >= limit) {
      Abort(RootCause(DeadlineExceeded(
                "fast path: no answer to " + round + " from rank(s) " + RankList(missing) +
                " within " + SecondsText(config_.timeout_seconds) + " (KOLO_TIMEOUT_SECONDS)")),
            true);
      return;
    }
  }
  if (blocked_ && now - blocked_since_ >= limit) {
    Abort(RootCause(DeadlineExceeded("waited " + SecondsText(config_.timeout_seconds) +
                                     " (KOLO_TIMEOUT_SECONDS) for controller response " +
                                     std::to_string(last_seq_ + 1) +
                                     ", which another rank has received")),
          true);
  }
}

// The job-wide Shutdown came: this rank may leave once everything any rank received has run
// and no round of its own is open (a peer may still need its answer otherwise).
bool BackgroundLoop::FastPathDone() const {
  return !rounds_.waiting() && decided_.empty() && last_seq_ == received_seq_ &&
         received_seq_ <= decided_seq_;
}

}  // namespace kolo
