#include "controller/controller.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "controller/fusion_planner.h"
#include "controller/negotiation_trace.h"
#include "core/check.h"

namespace kolo::controller {
namespace {

StallInspector::Config StallConfig(const Options& options) {
  return StallInspector::Config{options.stall_check_seconds, options.stall_shutdown_seconds};
}

std::chrono::steady_clock::duration StallPoll(const Options& c) {
  double shortest = 60;
  for (double seconds : {c.stall_check_seconds, c.stall_shutdown_seconds}) {
    if (seconds > 0) shortest = std::min(shortest, seconds);
  }
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(0.001, shortest / 4)));
}

Clock::TimePoint::duration CycleDuration(double ms) {
  return std::chrono::duration_cast<Clock::TimePoint::duration>(
      std::chrono::duration<double, std::milli>(ms));
}

const Options& Checked(const Options& options) {
  // The runtime validates Options before it builds a controller from them; the tables are
  // sized by the job's size.
  KOLO_CHECK(options.size >= 1) << "a controller for " << options.size << " ranks";
  return options;
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

Controller::Controller(const Options& options, TraceSink* trace, Clock* clock, Logger logger)
    : options_(Checked(options)),
      trace_(trace),
      cycle_(CycleDuration(options.cycle_time_ms)),
      stall_poll_(StallPoll(options)),
      clock_(clock),
      logger_(std::move(logger)),
      start_deadline_(clock->Now() + std::chrono::duration_cast<Clock::TimePoint::duration>(
                                         std::chrono::duration<double>(
                                             std::max(0.0, options.start_timeout_seconds)))),
      mark_cycles_(options.timeline_mark_cycles),
      negotiator_(options),
      stall_inspector_(StallConfig(options)),
      rendezvous_(options.size),
      last_heard_(static_cast<size_t>(options.size)),
      refused_after_abort_(static_cast<size_t>(options.size), false) {
  logger_->info(
      "controller: size {}, fusion threshold {} bytes, cycle time {} ms, cache {}, stall check "
      "{} s, stall shutdown {} s (0: off)",
      options_.size, options_.fusion_threshold_bytes, options_.cycle_time_ms,
      options_.cache_capacity, options_.stall_check_seconds, options_.stall_shutdown_seconds);
}

Controller::~Controller() {
  Stop();
}

void Controller::Attach(ControllerOutbox* outbox) {
  {
    MutexLock send_lock(&send_mu_);
    outbox_ = outbox;
  }
  Flush();
}

void Controller::Start() {
  sequencer_ = std::thread([this] { SequencerLoop(); });
}

void Controller::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  if (sequencer_.joinable()) sequencer_.join();
}

Status Controller::OnHello(const Hello& hello) {
  {
    MutexLock lock(&mu_);
    if (rendezvous_.complete() && (shutdown_sent_ || aborted_)) {
      // Every rank of this job was admitted and the job is over: the Hello is for the next
      // job, whose controller will take this one's port. Unavailable: the worker retries.
      return Unavailable(std::string("this controller's job is over (") +
                         (shutdown_sent_ ? "shut down" : "aborted") +
                         "); the next job's controller is not up yet");
    }
    if (aborted_) {
      // A late rank of an aborted start: it learns the verdict (RanksNotTold).
      if (hello.rank >= 0 && hello.rank < options_.size) refused_after_abort_[hello.rank] = true;
      return Aborted("the job was aborted: " + abort_reason_);
    }
    Status status = rendezvous_.Admit(hello);
    if (!status.ok()) {
      logger_->warn("refused a worker: {}", status.message());
      return status;
    }
    last_heard_[hello.rank] = clock_->Now();
    logger_->debug("rank {} joined from {} (data plane {})", hello.rank, hello.host,
                   hello.data_address);
    if (rendezvous_.complete()) {
      ControllerMessage welcome;
      welcome.kind = ControllerMessage::Kind::kWelcome;
      welcome.peers = rendezvous_.peers();
      QueueLocked(-1, std::move(welcome));
      logger_->info("all {} ranks joined; sent Welcome", options_.size);
      wake_.NotifyAll();  // the sequencer's start-timeout timer is moot; stall polling begins
    }
  }
  Flush();
  return Status::Ok();
}

void Controller::OnMessage(int rank, const WorkerMessage& message) {
  {
    MutexLock lock(&mu_);
    if (!rendezvous_.admitted(rank)) {
      logger_->warn("ignored a message from rank {}, which has not been admitted", rank);
      return;
    }
    last_heard_[rank] = clock_->Now();
    switch (message.kind) {
      case WorkerMessage::Kind::kPing: {
        if (message.ping_unix_us == 0) return;  // a keepalive: nothing to answer
        // Clock sync for the timeline: echo the worker's time with ours, on the wall clock
        // (the injected Clock is steady and means nothing to another host).
        ControllerMessage pong;
        pong.kind = ControllerMessage::Kind::kPong;
        pong.ping_unix_us = message.ping_unix_us;
        pong.controller_unix_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
        QueueLocked(rank, std::move(pong));
        break;
      }
      case WorkerMessage::Kind::kHello:
        AbortLocked("protocol error: rank " + std::to_string(rank) + " sent a second Hello");
        break;
      case WorkerMessage::Kind::kRequests:
        HandleRequestsLocked(rank, message.requests);
        break;
      case WorkerMessage::Kind::kShutdown:
        HandleShutdownLocked(rank);
        break;
      case WorkerMessage::Kind::kAbort: {
        // What the ranks were waiting for at that moment: for an abort a rank asked for (a
        // timed-out wait), the ranks that never submitted the op are the news.
        const std::string pending = PendingText(negotiator_.WatchedTables(), clock_->Now());
        AbortLocked("rank " + std::to_string(rank) + ": " + message.reason +
                    (pending.empty() ? "" : "; at the abort, " + pending));
        break;
      }
    }
  }
  Flush();
}

void Controller::OnStreamClosed(int rank, const Status& why) {
  {
    MutexLock lock(&mu_);
    // Refused streams never had an admitted rank; their closing must not touch the job.
    if (!rendezvous_.admitted(rank)) return;
    if (shutdown_sent_) {
      logger_->debug("rank {} closed its stream after the job-wide shutdown", rank);
      return;
    }
    if (negotiator_.table().has_shut_down(rank)) {
      logger_->info("rank {} left before every rank had shut down", rank);
      const int before = negotiator_.ready_count();
      std::vector<NegotiationEvent> events;
      negotiator_.AddGone(rank, tracing() ? &events : nullptr);
      if (!events.empty()) RecordNegotiation(trace_, events, clock_->Now());
      NoteReadyLocked(before);
      return;  // the sequencer plans and sends the failures
    }
    AbortLocked(LostReasonLocked(rank, why));
  }
  Flush();
}

std::string Controller::LostReasonLocked(int rank, const Status& why) const {
  const std::string who = "rank " + std::to_string(rank) + " lost: ";
  const double silent = std::chrono::duration<double>(clock_->Now() - last_heard_[rank]).count();
  if (options_.timeout_seconds > 0 && silent >= options_.timeout_seconds / 2) {
    char heard[32];
    std::snprintf(heard, sizeof(heard), "%.1f s", silent);
    return who + "nothing heard from it for " + heard + "; its control stream timed out after " +
           SecondsText(options_.timeout_seconds) +
           " (KOLO_TIMEOUT_SECONDS): process stopped, or its host or network gone";
  }
  return who +
         (why.ok() ? std::string("its stream closed without a shutdown notice") : why.message());
}

void Controller::HandleRequestsLocked(int rank, const std::vector<Request>& requests) {
  if (aborted_ || shutdown_sent_) return;  // the job is over: refuse further work
  const Clock::TimePoint now = clock_->Now();
  const int before = negotiator_.ready_count();
  std::vector<NegotiationEvent> events;  // the steps of the requests applied, even on error
  Status status = negotiator_.AddRequests(rank, requests, now, tracing() ? &events : nullptr);
  if (!events.empty()) RecordNegotiation(trace_, events, now);
  if (!status.ok()) {
    AbortLocked("protocol error: " + status.message());
    return;
  }
  const bool window_opened = before == 0 && negotiator_.ready_count() > 0;
  if (window_opened) window_start_ = now;
  // Plan here when nothing more is coming, rather than hand over to the sequencer thread: the
  // caller flushes right after, which saves a thread switch on the latency path. Only a
  // window left open needs the sequencer (to close it on time); names left pending need it
  // only for stall checks, and it looks at those on its own (SequencerLoop).
  Clock::TimePoint unused;
  PlanIfDueLocked(now, /*force=*/false, &unused);
  const bool still_open = negotiator_.ready_count() > 0;
  if (window_opened && still_open) wake_.NotifyAll();
}

void Controller::HandleShutdownLocked(int rank) {
  if (aborted_ || shutdown_sent_ || negotiator_.table().has_shut_down(rank)) return;
  const int before = negotiator_.ready_count();
  std::vector<NegotiationEvent> events;
  negotiator_.AddShutdown(rank, tracing() ? &events : nullptr);
  if (!events.empty()) RecordNegotiation(trace_, events, clock_->Now());
  logger_->info("rank {} sent its shutdown notice ({} of {})", rank,
                negotiator_.table().num_shut_down(), options_.size);
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
  if (tracing()) {
    // Pending names fail with the job: close their negotiation spans.
    std::vector<NegotiationEvent> ends;
    for (const PendingName& name : negotiator_.table().WaitingSince(Clock::TimePoint::max())) {
      ends.push_back(NegotiationEvent{NegotiationEvent::Kind::kEnd, name.name, name.op, -1});
    }
    RecordNegotiation(trace_, ends, clock_->Now());
  }
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = reason;
  QueueLocked(-1, std::move(abort));
  logger_->error("job aborted: {}", reason);
}

void Controller::NoteReadyLocked(int ready_before) {
  if (ready_before == 0 && negotiator_.ready_count() > 0) {
    window_start_ = clock_->Now();
    wake_.NotifyAll();
  }
}

bool Controller::PlanIfDueLocked(Clock::TimePoint now, bool force, Clock::TimePoint* due) {
  if (negotiator_.ready_count() == 0) return true;
  *due =
      window_start_ + (autotuner_ != nullptr ? CycleDuration(autotuner_->cycle_time_ms()) : cycle_);
  // The window only pays while more tensors may join the batch, i.e. while some rank has
  // announced a name that others have not yet. With nothing half-announced, plan at once: a
  // lone repeated tensor then costs no window at all.
  const bool more_coming = negotiator_.pending_count() > 0;
  if (!force && more_coming && now < *due) return false;
  std::vector<Response> responses = autotuner_ != nullptr
                                        ? negotiator_.Plan(autotuner_->fusion_threshold_bytes())
                                        : negotiator_.Plan();
  if (autotuner_ != nullptr && autotuner_->tunes_hierarchy()) {
    // Every rank runs these allreduces hierarchically or not by the tuner's rule, read once.
    const uint64_t min_bytes = autotuner_->hierarchy_min_bytes();
    for (Response& response : responses) {
      if (response.op == OpType::kAllreduce && !response.is_error()) {
        response.hierarchy_min_bytes = min_bytes;
      }
    }
  }
  LogBatch(logger_, responses);
  if (mark_cycles_.load(std::memory_order_relaxed) && tracing()) {
    RecordCycle(trace_, responses, now);
  }
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
  MutexLock send_lock(&send_mu_);
  if (outbox_ == nullptr) return;  // kept queued until Attach
  std::vector<Outgoing> batch;
  {
    MutexLock lock(&mu_);
    batch.swap(outgoing_);
  }
  for (const Outgoing& out : batch) {
    if (out.rank >= 0) {
      outbox_->Send(out.rank, out.message);
      continue;
    }
    outbox_->SendToAll(options_.size, out.message);
  }
}

bool Controller::aborted() const {
  MutexLock lock(&mu_);
  return aborted_;
}

std::string Controller::abort_reason() const {
  MutexLock lock(&mu_);
  return abort_reason_;
}

std::vector<int> Controller::RanksNotTold() const {
  MutexLock lock(&mu_);
  std::vector<int> ranks;
  if (!aborted_ || rendezvous_.complete()) return ranks;
  for (int rank = 0; rank < options_.size; ++rank) {
    if (!rendezvous_.admitted(rank) && !refused_after_abort_[rank]) ranks.push_back(rank);
  }
  return ranks;
}

bool Controller::shutdown_sent() const {
  MutexLock lock(&mu_);
  return shutdown_sent_;
}

}  // namespace kolo::controller
