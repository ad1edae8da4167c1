#include "core/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <random>

#include "core/errno_status.h"

namespace kolo {
namespace {

constexpr int kLowestPort = 10000;  // clear of well-known and commonly configured services
constexpr int kAttempts = 64;

// Binds 127.0.0.1:`port` (0: any) and returns the port bound, or -1.
int TryBind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int bound = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  close(fd);
  return bound;
}

}  // namespace

StatusOr<int> PickControllerPort() {
  int ephemeral_low = 32768, ephemeral_high = 60999;  // Linux's default
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (range >> low >> high && low > 0 && high >= low) {
    ephemeral_low = low;
    ephemeral_high = high;
  }
  // The larger stretch outside the ephemeral range, above kLowestPort.
  int first = kLowestPort, last = ephemeral_low - 1;
  if (65535 - ephemeral_high > last - first) {
    first = std::max(kLowestPort, ephemeral_high + 1);
    last = 65535;
  }
  if (last - first >= kAttempts) {
    std::random_device seed;
    std::mt19937 random(seed());
    std::uniform_int_distribution<int> pick(first, last);
    for (int i = 0; i < kAttempts; ++i) {
      const int port = TryBind(pick(random));
      if (port > 0) return port;
    }
  }
  const int port = TryBind(0);
  if (port > 0) return port;
  return ErrnoToStatus(errno, "cannot find a free port on 127.0.0.1");
}

}  // namespace kolo
