// relay_peer: a control relay in a process of its own, for control_relay_test.cc, which SIGKILLs
// it to lose a relay the way a dead rank's process loses it.
//   relay_peer <controller_address> <first_member> <members> <size>
// Starts a ControlRelay (hosted by rank <first_member>) with the tests' job credentials, prints
// "PORT <port>" once it holds its stream to the controller ("ERROR <text>" if it cannot), then
// serves until stdin closes.
#include <iostream>
#include <string>

#include "tests/transport/relay_test_options.h"
#include "transport/grpc/control_relay.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: relay_peer <controller_address> <first_member> <members> <size>\n";
    return 2;
  }
  kolo::transport::RelayOptions options = kolo::transport::testing::RelayOptionsFor(
      argv[1], std::stoi(argv[2]), std::stoi(argv[3]), std::stoi(argv[4]));
  auto relay = kolo::transport::ControlRelay::Start(
      options, std::chrono::steady_clock::now() + std::chrono::seconds(5));
  if (!relay.ok()) {
    std::cout << "ERROR " << relay.status().message() << std::endl;
    return 1;
  }
  std::cout << "PORT " << (*relay)->port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  (*relay)->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(2));
  return 0;
}
