// Raising this process's soft file-descriptor limit (RLIMIT_NOFILE) to its hard limit at init:
// rank 0's controller holds one descriptor per connection, so a 1024 soft limit let a local
// burst of connections fill the table (docs/SECURITY.md, "connection bursts"). The controller's
// front door (transport/grpc/front_door.h) recovers from EMFILE; with TLS gRPC's own listener,
// which does not, still accepts, and this raise is the defence there. Thread-safe (the limit
// is process-wide; raising it twice is harmless).
#pragma once

#include <cstdint>
#include <string>

namespace kolo {

struct FdLimitChange {
  uint64_t before = 0;  // the soft limit found
  uint64_t after = 0;   // the soft limit now (== before when nothing changed)
  std::string error;    // why it could not be raised, "" when it was or needed not be
};

// Sets the soft RLIMIT_NOFILE to the hard one (RLIM_INFINITY counts as the largest value).
FdLimitChange RaiseFdLimitToHard();

}  // namespace kolo
