#include "runtime/local_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace kolo {

StatusOr<std::string> LocalAddressRouting(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), "9", &hints, &result);
  if (rc != 0 || result == nullptr) {
    return Unavailable("cannot resolve controller host '" + host + "': " + gai_strerror(rc));
  }
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  std::string address;
  if (fd >= 0 && connect(fd, result->ai_addr, result->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    char text[INET_ADDRSTRLEN] = {0};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr) {
      address = text;
    }
  }
  int saved_errno = errno;
  if (fd >= 0) close(fd);
  freeaddrinfo(result);
  if (address.empty()) {
    return Unavailable("no local interface routes to controller host '" + host +
                       "': " + std::strerror(saved_errno) + " (set KOLO_DATA_ADDR)");
  }
  return address;
}

std::string LocalHostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

Status SplitHostPort(const std::string& address, const std::string& what, std::string* host,
                     int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgument(what + " '" + address + "' is not host:port");
  }
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  char* end = nullptr;
  long p = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p < 0 || p > 65535) {
    return InvalidArgument(what + " '" + address + "' has an invalid port");
  }
  *host = h;
  *port = static_cast<int>(p);
  return Status::Ok();
}

StatusOr<std::string> InterfaceOfAddress(const std::string& address) {
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return Unavailable("getifaddrs: " + std::string(std::strerror(errno)));
  }
  std::string found;
  for (struct ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    if (inet_ntop(family, raw, text, sizeof(text)) != nullptr && address == text) {
      found = i->ifa_name;
    }
  }
  freeifaddrs(list);
  if (found.empty()) return InvalidArgument("no network interface has address " + address);
  return found;
}

}  // namespace kolo
