// Clock: the source of time for cycle windows, deadlines and stall detection, injectable so
// tests control time. SteadyClock is the real one; ManualClock advances only when told.
// Both are safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

namespace kolo {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  static SteadyClock* Get() {
    static SteadyClock clock;
    return &clock;
  }
};

class ManualClock final : public Clock {
 public:
  TimePoint Now() const override { return TimePoint(std::chrono::nanoseconds(now_ns_.load())); }
  void Advance(std::chrono::nanoseconds d) { now_ns_ += d.count(); }

 private:
  std::atomic<int64_t> now_ns_{1'000'000'000};
};

// `seconds` (a configured time, e.g. KOLO_TIMEOUT_SECONDS) as a clock duration.
inline Clock::TimePoint::duration DurationOf(double seconds) {
  return std::chrono::duration_cast<Clock::TimePoint::duration>(
      std::chrono::duration<double>(seconds));
}

// "30 s", "0.5 s", "1.25 s": a deadline as error messages print it.
inline std::string SecondsText(double seconds) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%g s", seconds);
  return buffer;
}

}  // namespace kolo
