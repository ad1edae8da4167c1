#include "transport/deadline.h"

#include <climits>
#include <cstdio>

namespace kolo::transport {

std::chrono::steady_clock::duration SecondsToDuration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

SteadyTime AddSeconds(SteadyTime now, double seconds) {
  return now + SecondsToDuration(seconds);
}

int PollTimeoutMs(SteadyTime now, SteadyTime deadline) {
  if (deadline <= now) return 0;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now).count();
  long long ms = (us + 999) / 1000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

std::chrono::system_clock::time_point ToSystemClock(SteadyTime deadline) {
  const auto remaining = deadline - std::chrono::steady_clock::now();
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(remaining);
}

}  // namespace kolo::transport
