#include "transport/grpc/session_reaper.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "transport/grpc/control_session.h"

namespace kolo::transport {

SessionReaper::SessionReaper(Logger logger) : logger_(std::move(logger)) {
  thread_ = std::thread([this] { Loop(); });
}

SessionReaper::~SessionReaper() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  Join();
}

void SessionReaper::Join() {
  if (thread_.joinable()) thread_.join();
}

void SessionReaper::CancelAllAndStop() {
  {
    MutexLock lock(&mu_);
    for (const auto& [session, deadline] : deadlines_) session->context()->TryCancel();
    stop_ = true;
  }
  wake_.NotifyAll();
}

void SessionReaper::Set(ControlSession* session, SteadyTime deadline, bool flushing) {
  bool wake = false;
  {
    MutexLock lock(&mu_);
    deadlines_[session] = Deadline{deadline, flushing};
    wake = deadline < next_;
  }
  if (wake) wake_.NotifyAll();
}

void SessionReaper::Clear(ControlSession* session) {
  MutexLock lock(&mu_);
  deadlines_.erase(session);
}

void SessionReaper::Loop() {
  MutexLock lock(&mu_);
  while (!stop_) {
    SteadyTime next = SteadyTime::max();
    const SteadyTime now = std::chrono::steady_clock::now();
    for (auto& [session, deadline] : deadlines_) {
      if (deadline.at <= now) {
        if (deadline.flushing && session->queued() > 0) {
          logger_->warn("control stream of rank {}: cancelled with {} messages not yet written",
                        session->rank(), session->queued());
        }
        // Its pending read or write fails; the session then finishes and clears its deadline.
        session->context()->TryCancel();
        deadline.at = SteadyTime::max();
      }
      next = std::min(next, deadline.at);
    }
    next_ = next;
    if (next == SteadyTime::max()) {
      wake_.Wait(&mu_);  // woken by a new deadline or by CancelAllAndStop
    } else {
      wake_.WaitUntil(&mu_, next);
    }
  }
}

}  // namespace kolo::transport
