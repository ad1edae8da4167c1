// Fault: what a collaborator of the background loop returns when a step of a pass must end the
// job, and where the error came from, which decides what the loop does before it aborts
// (BackgroundLoop::AbortOn): wait for the controller's verdict on a failed collective, tell the
// controller (first, and then wait for its verdict, when the application asked for the abort),
// or neither. No fault (ok()) means the step went on.
//
// Threading: a value type.
#pragma once

#include <optional>
#include <utility>

#include "kolo/status.h"

namespace kolo {

class [[nodiscard]] Fault {
 public:
  enum class Origin {
    kNone,            // no fault
    kHere,            // this rank found it (a protocol error, an inconsistent decision)
    kFromController,  // the controller said so, or the stream to it broke: it knows already
    kInCollective,    // a collective or its round failed here: the culprit may be elsewhere
    kRequested,       // the application ended the job (Runtime::AbortJob): the controller knows
                      // which ranks had not submitted what, and says so in its verdict
  };

  Fault() = default;  // none

  // Each is no fault when `why` is OK, so a step can return Fault::Here(SomeCall()).
  // This rank found it: the controller is told.
  static Fault Here(Status why) { return Fault(Origin::kHere, std::move(why)); }
  // The controller said so, or its stream broke: telling it would be in vain.
  static Fault FromController(Status why) { return Fault(Origin::kFromController, std::move(why)); }
  // A collective failed here: the loop waits a bounded time for the controller's verdict,
  // which may name the real culprit (ControllerSession::RootCause), then tells it.
  static Fault InCollective(Status why) { return Fault(Origin::kInCollective, std::move(why)); }
  // The application asked to end the job: the controller is told first, and its verdict (the
  // reason with the ranks that had not submitted the pending ops) is what every op fails with.
  static Fault Requested(Status why) { return Fault(Origin::kRequested, std::move(why)); }

  bool ok() const { return origin_ == Origin::kNone; }
  Origin origin() const { return origin_; }
  // The error; OK when there is no fault.
  const Status& why() const {
    static const Status kNone;
    return why_ ? *why_ : kNone;
  }

 private:
  Fault(Origin origin, Status why) {
    if (why.ok()) return;
    origin_ = origin;
    why_.emplace(std::move(why));
  }

  Origin origin_ = Origin::kNone;
  // Empty when there is no fault: a step that went on (the per-op path) builds no Status here.
  std::optional<Status> why_;
};

}  // namespace kolo
