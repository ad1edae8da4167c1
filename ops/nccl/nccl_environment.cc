#include "ops/nccl/nccl_environment.h"

namespace kolo::gpu {

std::vector<NcclEnvDefault> NcclEnvironmentDefaults(const std::string& interface_name) {
  std::vector<NcclEnvDefault> defaults;
  if (interface_name.empty()) return defaults;
  const bool misread = interface_name.find(',') != std::string::npos ||
                       interface_name.front() == '^' || interface_name.front() == '=';
  if (!misread) {
    defaults.push_back({"NCCL_SOCKET_IFNAME", "=" + interface_name,
                        "NCCL's bootstrap and socket traffic on " + interface_name +
                            ", the interface kolo reaches the controller through"});
  }
  return defaults;
}

}  // namespace kolo::gpu
