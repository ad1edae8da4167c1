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
    : settings_{Checked(options),
                trace,
                CycleDuration(options.cycle_time_ms),
                StallPoll(options),
                clock,
                std::move(logger),
                clock->Now() + std::chrono::duration_cast<Clock::TimePoint::duration>(
                                   std::chrono::duration<double>(
                                       std::max(0.0, options.start_timeout_seconds)))},
      mark_cycles_(options.timeline_mark_cycles),
      postbox_(options.size),
      negotiator_(options),
      stall_inspector_(StallConfig(options)),
      rendezvous_(options.size),
      ranks_(static_cast<size_t>(options.size)) {
  settings_.logger->info(
      "controller: size {}, fusion threshold {} bytes, cycle time {} ms, cache {}, stall check "
      "{} s, stall shutdown {} s (0: off)",
      settings_.options.size, settings_.options.fusion_threshold_bytes,
      settings_.options.cycle_time_ms, settings_.options.cache_capacity,
      settings_.options.stall_check_seconds, settings_.options.stall_shutdown_seconds);
}

Controller::~Controller() {
  Stop();
}

void Controller::Attach(ControllerOutbox* outbox) {
  postbox_.Attach(outbox);
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
    if (rendezvous_.complete() && (verdict_.shutdown_sent || verdict_.aborted)) {
      // Every rank of this job was admitted and the job is over: the Hello is for the next
      // job, whose controller will take this one's port. Unavailable: the worker retries.
      return Unavailable(std::string("this controller's job is over (") +
                         (verdict_.shutdown_sent ? "shut down" : "aborted") +
                         "); the next job's controller is not up yet");
    }
    if (verdict_.aborted) {
      // A late rank of an aborted start: it learns the verdict (RanksNotTold).
      if (hello.rank >= 0 && hello.rank < settings_.options.size)
        ranks_[hello.rank].refused_after_abort = true;
      return Aborted("the job was aborted: " + verdict_.abort_reason);
    }
    Status status = rendezvous_.Admit(hello);
    if (!status.ok()) {
      settings_.logger->warn("refused a worker: {}", status.message());
      return status;
    }
    ranks_[hello.rank].last_heard = settings_.clock->Now();
    settings_.logger->debug("rank {} joined from {} (data plane {})", hello.rank, hello.host,
                            hello.data_address);
    if (rendezvous_.complete()) {
      ControllerMessage welcome;
      welcome.kind = ControllerMessage::Kind::kWelcome;
      welcome.peers = rendezvous_.peers();
      postbox_.Queue(-1, std::move(welcome));
      settings_.logger->info("all {} ranks joined; sent Welcome", settings_.options.size);
      wake_.NotifyAll();  // the sequencer's start-timeout timer is moot; stall polling begins
    }
  }
  postbox_.Flush();
  return Status::Ok();
}

void Controller::OnMessage(int rank, const WorkerMessage& message) {
  {
    MutexLock lock(&mu_);
    if (!rendezvous_.admitted(rank)) {
      settings_.logger->warn("ignored a message from rank {}, which has not been admitted", rank);
      return;
    }
    ranks_[rank].last_heard = settings_.clock->Now();
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
        postbox_.Queue(rank, std::move(pong));
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
        const std::string pending =
            PendingText(negotiator_.WatchedTables(), settings_.clock->Now());
        AbortLocked("rank " + std::to_string(rank) + ": " + message.reason +
                    (pending.empty() ? "" : "; at the abort, " + pending));
        break;
      }
    }
  }
  postbox_.Flush();
}

void Controller::OnStreamClosed(int rank, const Status& why) {
  {
    MutexLock lock(&mu_);
    // Refused streams never had an admitted rank; their closing must not touch the job.
    if (!rendezvous_.admitted(rank)) return;
    if (verdict_.shutdown_sent) {
      settings_.logger->debug("rank {} closed its stream after the job-wide shutdown", rank);
      return;
    }
    if (negotiator_.table().has_shut_down(rank)) {
      settings_.logger->info("rank {} left before every rank had shut down", rank);
      const int before = negotiator_.ready_count();
      std::vector<NegotiationEvent> events;
      negotiator_.AddGone(rank, settings_.tracing() ? &events : nullptr);
      if (!events.empty()) RecordNegotiation(settings_.trace, events, settings_.clock->Now());
      NoteReadyLocked(before);
      return;  // the sequencer plans and sends the failures
    }
    AbortLocked(LostReasonLocked(rank, why));
  }
  postbox_.Flush();
}

std::string Controller::LostReasonLocked(int rank, const Status& why) const {
  const std::string who = "rank " + std::to_string(rank) + " lost: ";
  const double silent =
      std::chrono::duration<double>(settings_.clock->Now() - ranks_[rank].last_heard).count();
  if (settings_.options.timeout_seconds > 0 && silent >= settings_.options.timeout_seconds / 2) {
    char heard[32];
    std::snprintf(heard, sizeof(heard), "%.1f s", silent);
    return who + "nothing heard from it for " + heard + "; its control stream timed out after " +
           SecondsText(settings_.options.timeout_seconds) +
           " (KOLO_TIMEOUT_SECONDS): process stopped, or its host or network gone";
  }
  return who +
         (why.ok() ? std::string("its stream closed without a shutdown notice") : why.message());
}

void Controller::HandleRequestsLocked(int rank, const std::vector<Request>& requests) {
  if (verdict_.aborted || verdict_.shutdown_sent) return;  // the job is over: refuse further work
  const Clock::TimePoint now = settings_.clock->Now();
  const int before = negotiator_.ready_count();
  std::vector<NegotiationEvent> events;  // the steps of the requests applied, even on error
  Status status =
      negotiator_.AddRequests(rank, requests, now, settings_.tracing() ? &events : nullptr);
  if (!events.empty()) RecordNegotiation(settings_.trace, events, now);
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
  if (verdict_.aborted || verdict_.shutdown_sent || negotiator_.table().has_shut_down(rank)) return;
  const int before = negotiator_.ready_count();
  std::vector<NegotiationEvent> events;
  negotiator_.AddShutdown(rank, settings_.tracing() ? &events : nullptr);
  if (!events.empty()) RecordNegotiation(settings_.trace, events, settings_.clock->Now());
  settings_.logger->info("rank {} sent its shutdown notice ({} of {})", rank,
                         negotiator_.table().num_shut_down(), settings_.options.size);
  if (!negotiator_.all_shut_down()) {
    NoteReadyLocked(before);
    return;
  }
  // Last notice: the failures it caused go out first, then Shutdown, in that order.
  Clock::TimePoint unused;
  PlanIfDueLocked(settings_.clock->Now(), /*force=*/true, &unused);
  ControllerMessage shutdown;
  shutdown.kind = ControllerMessage::Kind::kShutdown;
  postbox_.Queue(-1, std::move(shutdown));
  verdict_.shutdown_sent = true;
  settings_.logger->info("every rank sent its shutdown notice; sent Shutdown");
}

void Controller::AbortLocked(const std::string& reason) {
  if (verdict_.aborted || verdict_.shutdown_sent) return;  // the first root cause wins
  verdict_.aborted = true;
  verdict_.abort_reason = reason;
  negotiator_.DropReady();
  if (settings_.tracing()) {
    // Pending names fail with the job: close their negotiation spans.
    std::vector<NegotiationEvent> ends;
    for (const PendingName& name : negotiator_.table().WaitingSince(Clock::TimePoint::max())) {
      ends.push_back(NegotiationEvent{NegotiationEvent::Kind::kEnd, name.name, name.op, -1});
    }
    RecordNegotiation(settings_.trace, ends, settings_.clock->Now());
  }
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = reason;
  postbox_.Queue(-1, std::move(abort));
  settings_.logger->error("job aborted: {}", reason);
}

void Controller::NoteReadyLocked(int ready_before) {
  if (ready_before == 0 && negotiator_.ready_count() > 0) {
    window_start_ = settings_.clock->Now();
    wake_.NotifyAll();
  }
}

bool Controller::PlanIfDueLocked(Clock::TimePoint now, bool force, Clock::TimePoint* due) {
  if (negotiator_.ready_count() == 0) return true;
  *due = window_start_ + (settings_.autotuner != nullptr
                              ? CycleDuration(settings_.autotuner->cycle_time_ms())
                              : settings_.cycle);
  // The window only pays while more tensors may join the batch, i.e. while some rank has
  // announced a name that others have not yet. With nothing half-announced, plan at once: a
  // lone repeated tensor then costs no window at all.
  const bool more_coming = negotiator_.pending_count() > 0;
  if (!force && more_coming && now < *due) return false;
  std::vector<Response> responses =
      settings_.autotuner != nullptr
          ? negotiator_.Plan(settings_.autotuner->fusion_threshold_bytes())
          : negotiator_.Plan();
  if (settings_.autotuner != nullptr && settings_.autotuner->tunes_hierarchy()) {
    // Every rank runs these allreduces hierarchically or not by the tuner's rule, read once.
    const uint64_t min_bytes = settings_.autotuner->hierarchy_min_bytes();
    for (Response& response : responses) {
      if (response.op == OpType::kAllreduce && !response.is_error()) {
        response.hierarchy_min_bytes = min_bytes;
      }
    }
  }
  LogBatch(settings_.logger, responses);
  if (mark_cycles_.load(std::memory_order_relaxed) && settings_.tracing()) {
    RecordCycle(settings_.trace, responses, now);
  }
  ControllerMessage batch;
  batch.kind = ControllerMessage::Kind::kResponses;
  batch.responses = std::move(responses);
  postbox_.Queue(-1, std::move(batch));
  return true;
}

bool Controller::aborted() const {
  MutexLock lock(&mu_);
  return verdict_.aborted;
}

std::string Controller::abort_reason() const {
  MutexLock lock(&mu_);
  return verdict_.abort_reason;
}

std::vector<int> Controller::RanksNotTold() const {
  MutexLock lock(&mu_);
  std::vector<int> ranks;
  if (!verdict_.aborted || rendezvous_.complete()) return ranks;
  for (int rank = 0; rank < settings_.options.size; ++rank) {
    if (!rendezvous_.admitted(rank) && !ranks_[rank].refused_after_abort) ranks.push_back(rank);
  }
  return ranks;
}

bool Controller::shutdown_sent() const {
  MutexLock lock(&mu_);
  return verdict_.shutdown_sent;
}

}  // namespace kolo::controller
