// PhaseScope: reports the span of one executor phase (COPY_INPUT, RING_ALLREDUCE, ...) to a
// PhaseObserver when it goes out of scope; the timeline draws them. Internal to ops/; used on
// the background thread only.
#pragma once

#include "core/clock.h"
#include "core/executor.h"

namespace kolo::ops {

class PhaseScope {
 public:
  PhaseScope(PhaseObserver* observer, const char* name)
      : observer_(observer), name_(name), start_(Now()) {}
  ~PhaseScope() {
    if (observer_ != nullptr) observer_->OnPhase(name_, start_, Now());
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Clock::TimePoint Now() const {
    return observer_ != nullptr ? SteadyClock::Get()->Now() : Clock::TimePoint();
  }
  PhaseObserver* const observer_;
  const char* const name_;
  const Clock::TimePoint start_;
};

}  // namespace kolo::ops
