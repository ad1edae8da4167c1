// Deadline arithmetic for the data mesh's poll() loops (transport/tcp/mesh_connector.cc,
// transport/tcp/stream_pump.cc): converting configured seconds to time points and time points to
// poll() timeouts, and printing durations in error messages. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <string>

namespace kolo::transport {

using SteadyTime = std::chrono::steady_clock::time_point;

// `seconds` (fractions allowed) as a steady_clock duration.
std::chrono::steady_clock::duration SecondsToDuration(double seconds);

// `now` plus `seconds`.
SteadyTime AddSeconds(SteadyTime now, double seconds);

// Milliseconds from `now` until `deadline` for poll(): rounded up so that a wake-up is never
// early, 0 once it has passed, clamped to what an int holds.
int PollTimeoutMs(SteadyTime now, SteadyTime deadline);

// The same instant on the system clock, for APIs (gRPC) that take only system_clock deadlines.
std::chrono::system_clock::time_point ToSystemClock(SteadyTime deadline);

}  // namespace kolo::transport
