#include "core/free_port.h"

#include <catch2/catch.hpp>
#include <fstream>

namespace kolo {
namespace {

TEST_CASE("PickControllerPort picks a free port outside the ephemeral range", "[core][port]") {
  int low = 32768, high = 60999;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int l = 0, h = 0;
  if (range >> l >> h) low = l, high = h;
  for (int i = 0; i < 20; ++i) {
    StatusOr<int> port = PickControllerPort();
    REQUIRE(port.ok());
    CHECK(*port >= 10000);
    CHECK(*port <= 65535);
    // Outside the range outgoing connections and bind(0) draw from, so they cannot take it.
    CHECK((*port < low || *port > high));
  }
}

}  // namespace
}  // namespace kolo
