// The control-relay tests' job settings, shared by control_relay_test.cc and the relay_peer
// process it starts: the job's credentials and a relay's options. Pure functions.
#pragma once

#include <string>

#include "transport/grpc/control_relay.h"

namespace kolo::transport::testing {

constexpr double kRelayTimeoutSeconds = 5;

inline ControlSecurity RelayTestSecurity() {
  ControlSecurity security;
  security.credentials = {"relay-test-key", "relay-test"};
  return security;
}

// The relay for ranks first..first + members - 1 of a `size`-rank job, hosted by `first`.
inline RelayOptions RelayOptionsFor(const std::string& controller, int first, int members,
                                    int size) {
  RelayOptions options;
  options.controller_address = controller;
  options.host_rank = first;
  options.first_member = first;
  options.members = members;
  options.size = size;
  options.host = "relay-host-" + std::to_string(first);
  options.timeout_seconds = kRelayTimeoutSeconds;
  options.cycle_seconds = 0.001;
  options.security = RelayTestSecurity();
  return options;
}

}  // namespace kolo::transport::testing
