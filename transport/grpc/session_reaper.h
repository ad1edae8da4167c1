// SessionReaper: the control server's one thread that cancels a control stream whose handshake
// or last flush outlived its deadline (ControlSessions owns one; docs/RELIABILITY.md). A
// cancelled stream's pending read or write fails, and the session then finishes.
// Threading: every method may be called from any thread. mu_ is taken on its own or before a
// session's lock (the loop reads a session's queue and cancels its context under it). A
// session must Clear its deadline before it is deleted.
#pragma once

#include <map>
#include <thread>

#include "core/logging.h"
#include "core/mutex.h"
#include "transport/deadline.h"

namespace kolo::transport {

class ControlSession;

class SessionReaper {
 public:
  explicit SessionReaper(Logger logger);
  ~SessionReaper();  // stops and joins the thread

  // `session` is cancelled at `deadline` (replacing an earlier one) until Clear; `flushing`
  // says it is writing its last messages (a cancel then logs how many were left).
  void Set(ControlSession* session, SteadyTime deadline, bool flushing) KOLO_EXCLUDES(mu_);
  void Clear(ControlSession* session) KOLO_EXCLUDES(mu_);
  // Cancels every session that has a deadline now and ends the thread's loop.
  void CancelAllAndStop() KOLO_EXCLUDES(mu_);
  // Waits for the thread to end (after CancelAllAndStop).
  void Join();

 private:
  struct Deadline {
    SteadyTime at;
    bool flushing = false;  // else: the handshake's
  };
  void Loop() KOLO_EXCLUDES(mu_);

  const Logger logger_;
  Mutex mu_;
  std::map<ControlSession*, Deadline> deadlines_ KOLO_GUARDED_BY(mu_);
  bool stop_ KOLO_GUARDED_BY(mu_) = false;
  // When the loop wakes next (max: not before a notification); a deadline after it needs no
  // wake-up, which keeps a thousand streams' handshakes from waking it a thousand times.
  SteadyTime next_ KOLO_GUARDED_BY(mu_) = SteadyTime::max();
  CondVar wake_;  // with mu_
  std::thread thread_;
};

}  // namespace kolo::transport
