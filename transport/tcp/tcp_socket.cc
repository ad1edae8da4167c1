#include "transport/tcp/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/errno_status.h"

namespace kolo::transport {
namespace {

constexpr int kListenBacklog = 128;

Status SetIntOption(int fd, int level, int option, int value, const char* name) {
  if (setsockopt(fd, level, option, &value, sizeof(value)) != 0) {
    return ErrnoToStatus(errno, std::string("setsockopt(") + name + ")");
  }
  return Status::Ok();
}

// Buffer sizes must be set before listen()/connect() so that TCP window scaling uses them.
Status SetBufferSizes(int fd) {
  KOLO_RETURN_IF_ERROR(SetIntOption(fd, SOL_SOCKET, SO_SNDBUF, kSocketBufferBytes, "SO_SNDBUF"));
  return SetIntOption(fd, SOL_SOCKET, SO_RCVBUF, kSocketBufferBytes, "SO_RCVBUF");
}

std::string AddressText(const sockaddr* addr, socklen_t length) {
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (getnameinfo(addr, length, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "<unknown address>";
  }
  return JoinHostPort(host, std::atoi(port));
}

}  // namespace

std::string SocketAddress::ToString() const {
  return AddressText(reinterpret_cast<const sockaddr*>(&storage), length);
}

Status ParseHostPort(const std::string& address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return InvalidArgument("'" + address + "' is not a host:port address");
  }
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string p = address.substr(colon + 1);
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(p) > 65535) {
    return InvalidArgument("'" + address + "' has no valid port (0..65535)");
  }
  *host = h;
  *port = std::stoi(p);
  return Status::Ok();
}

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool IsWildcardHost(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

StatusOr<SocketAddress> ResolveAddress(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    return Unavailable("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  SocketAddress address;
  std::memcpy(&address.storage, result->ai_addr, result->ai_addrlen);
  address.length = result->ai_addrlen;
  freeaddrinfo(result);
  return address;
}

StatusOr<UniqueFd> ListenOn(const std::string& host, int port, int* bound_port) {
  const std::string bind_host = host.empty() ? "0.0.0.0" : host;
  KOLO_ASSIGN_OR_RETURN(SocketAddress address, ResolveAddress(bind_host, port));
  const std::string where = JoinHostPort(bind_host, port);
  UniqueFd fd(socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoToStatus(errno, "socket() for listening on " + where);
  KOLO_RETURN_IF_ERROR(SetIntOption(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
  KOLO_RETURN_IF_ERROR(SetBufferSizes(fd.get()));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    return ErrnoToStatus(errno, "cannot bind to " + where);
  }
  if (listen(fd.get(), kListenBacklog) != 0) {
    return ErrnoToStatus(errno, "cannot listen on " + where);
  }
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    return ErrnoToStatus(errno, "getsockname() of the listener on " + where);
  }
  *bound_port = local.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port)
                    : ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
  return fd;
}

StatusOr<UniqueFd> StartConnect(const SocketAddress& address) {
  UniqueFd fd(socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoToStatus(errno, "socket() for " + address.ToString());
  KOLO_RETURN_IF_ERROR(SetBufferSizes(fd.get()));
  KOLO_RETURN_IF_ERROR(TuneDataSocket(fd.get()));
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0 &&
      errno != EINPROGRESS) {
    return ErrnoToStatus(errno, "cannot connect to " + address.ToString());
  }
  return fd;
}

StatusOr<UniqueFd> AcceptOne(int listen_fd, std::string* remote) {
  sockaddr_storage peer{};
  socklen_t length = sizeof(peer);
  int fd;
  do {
    fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &length,
                 SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    // A connection that was reset while queued is not the listener's failure.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return UniqueFd();
    return ErrnoToStatus(errno, "accept() on the data-mesh listener");
  }
  *remote = AddressText(reinterpret_cast<const sockaddr*>(&peer), length);
  return UniqueFd(fd);
}

Status TuneDataSocket(int fd) {
  return SetIntOption(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
}

int PendingSocketError(int fd) {
  int err = 0;
  socklen_t length = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &length) != 0) return errno;
  return err;
}

}  // namespace kolo::transport
