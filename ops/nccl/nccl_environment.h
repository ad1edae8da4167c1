// What NCCL's environment needs from kolo: the variables to set, when the user has not set them,
// before the first NCCL call of the process (NCCL reads them once). The runtime calls
// NcclEnvironmentDefaults and does the setenv; this file reads and writes no environment.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace kolo::gpu {

struct NcclEnvDefault {
  std::string name;   // "NCCL_SOCKET_IFNAME"
  std::string value;  // "=eth0"
  std::string why;    // for the log line that says it was set
};

// For the network interface kolo's own traffic uses (the one that routes to the controller,
// runtime/local_address.h): NCCL_SOCKET_IFNAME pinned to exactly that interface ("=" + name:
// NCCL otherwise matches names by prefix, and picks its own interface, which on hosts with
// several networks may be one the peers cannot reach). Nothing for an empty name, or one NCCL
// would misread as a list or an exclusion (',', a leading '^' or '=').
std::vector<NcclEnvDefault> NcclEnvironmentDefaults(const std::string& interface_name);

}  // namespace kolo::gpu
