#include "transport/grpc/listen_address.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>

namespace kolo::transport {
namespace {

constexpr int kBacklog = 1024;

struct HostPort {
  std::string host;  // without brackets; "" for every address
  std::string port;
};

bool Split(const std::string& address, HostPort* out) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  out->host = address.substr(0, colon);
  out->port = address.substr(colon + 1);
  if (out->host.size() >= 2 && out->host.front() == '[' && out->host.back() == ']') {
    out->host = out->host.substr(1, out->host.size() - 2);
  }
  return !out->port.empty();
}

using AddressList = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

bool HasIpv4(const addrinfo* list) {
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) return true;
  }
  return false;
}

AddressList Resolve(const HostPort& where, int* error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  *error = getaddrinfo(where.host.empty() || where.host == "*" ? nullptr : where.host.c_str(),
                       where.port.c_str(), &hints, &found);
  return AddressList(*error == 0 ? found : nullptr, &freeaddrinfo);
}

// A socket for `a`, bound; -1 with errno set if socket() or bind() failed. `v6_only`: an IPv6
// socket takes IPv6 only, because the list has IPv4 addresses with sockets of their own; an
// IPv6 address alone ("[::]:port") stays dual-stack, as gRPC binds it.
int BoundSocket(const addrinfo& a, int flags, bool v6_only) {
  const int fd = socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC | flags, a.ai_protocol);
  if (fd < 0) return -1;
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));  // as gRPC: TIME_WAIT is fine
  if (a.ai_family == AF_INET6 && v6_only) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
  }
  if (bind(fd, a.ai_addr, a.ai_addrlen) != 0) {
    const int error = errno;
    close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

void SetPort(sockaddr* address, int port) {
  if (address->sa_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(address)->sin_port = htons(static_cast<uint16_t>(port));
  } else if (address->sa_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(address)->sin6_port = htons(static_cast<uint16_t>(port));
  }
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return 0;
  if (bound.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
}

// The sentence for a bind that failed with `error`; OK for errors gRPC would explain itself.
Status BindFailure(const std::string& address, const HostPort& where, int error) {
  if (error == EADDRINUSE) {
    return Unavailable("the controller cannot listen on " + address + ": address in use (port " +
                       where.port + " is taken by another job's controller or another program); " +
                       "choose another port in KOLO_CONTROLLER");
  }
  if (error == EADDRNOTAVAIL) {
    return Unavailable("the controller cannot listen on " + address + ": " + where.host +
                       " is not an address of this host (KOLO_CONTROLLER names rank 0's host)");
  }
  if (error == EACCES) {
    return Unavailable("the controller cannot listen on " + address + ": port " + where.port +
                       " needs privileges; choose a port above 1023 in KOLO_CONTROLLER");
  }
  return Status::Ok();
}

constexpr char kUnixAbstract[] = "unix-abstract:";

// A listening Unix-domain socket named `name` in the abstract namespace (no file to remove).
StatusOr<std::vector<UniqueFd>> ListenOnAbstract(const std::string& address,
                                                 const std::string& name) {
  sockaddr_un where{};
  where.sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(where.sun_path)) {
    return InvalidArgument("cannot listen on '" + address + "': the name must have 1 to " +
                           std::to_string(sizeof(where.sun_path) - 1) + " bytes");
  }
  std::memcpy(where.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  const socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Unavailable("cannot listen on " + address + ": " + std::strerror(errno));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&where), length) != 0) {
    const int error = errno;
    return Unavailable("cannot listen on " + address + ": " +
                       (error == EADDRINUSE ? std::string("the name is in use (another process of "
                                                          "this job, or of a job with its name?)")
                                            : std::string(std::strerror(error))));
  }
  if (listen(fd.get(), kBacklog) != 0) {
    return Unavailable("cannot listen on " + address + ": listen: " + std::strerror(errno));
  }
  std::vector<UniqueFd> listeners;
  listeners.push_back(std::move(fd));
  return listeners;
}

}  // namespace

bool IsUnixAbstractAddress(const std::string& address) {
  return address.rfind(kUnixAbstract, 0) == 0;
}

StatusOr<std::vector<UniqueFd>> ListenOn(const std::string& address, int* port) {
  if (IsUnixAbstractAddress(address)) {
    *port = 0;
    return ListenOnAbstract(address, address.substr(sizeof(kUnixAbstract) - 1));
  }
  HostPort where;
  if (!Split(address, &where)) {
    return InvalidArgument("the controller cannot listen on '" + address +
                           "': expected host:port (KOLO_CONTROLLER)");
  }
  int error = 0;
  AddressList found = Resolve(where, &error);
  if (!found) {
    return Unavailable("the controller cannot listen on " + address + ": " + gai_strerror(error));
  }
  std::vector<UniqueFd> listeners;
  *port = 0;
  int unavailable = 0;  // an address of a family this host lacks ("localhost" as ::1)
  for (addrinfo* a = found.get(); a != nullptr; a = a->ai_next) {
    if (*port != 0) SetPort(a->ai_addr, *port);  // port 0: every socket on the one picked
    UniqueFd fd(BoundSocket(*a, SOCK_NONBLOCK, HasIpv4(found.get())));
    if (!fd.valid() && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)) {
      unavailable = errno;
      continue;
    }
    if (!fd.valid()) {
      const int bind_error = errno;
      KOLO_RETURN_IF_ERROR(BindFailure(address, where, bind_error));
      return Unavailable("the controller cannot listen on " + address + ": " +
                         std::strerror(bind_error));
    }
    if (listen(fd.get(), kBacklog) != 0) {
      return Unavailable("the controller cannot listen on " + address +
                         ": listen: " + std::strerror(errno));
    }
    if (*port == 0) *port = BoundPort(fd.get());
    listeners.push_back(std::move(fd));
  }
  if (listeners.empty()) {
    KOLO_RETURN_IF_ERROR(BindFailure(address, where, unavailable));
    return Unavailable("the controller cannot listen on " + address + ": no usable address");
  }
  return listeners;
}

Status ProbeListenAddress(const std::string& address) {
  HostPort where;
  if (!Split(address, &where) || where.port == "0") return Status::Ok();
  int error = 0;
  AddressList found = Resolve(where, &error);
  if (!found) return Status::Ok();
  for (addrinfo* a = found.get(); a != nullptr; a = a->ai_next) {
    UniqueFd fd(BoundSocket(*a, 0, HasIpv4(found.get())));
    if (!fd.valid()) KOLO_RETURN_IF_ERROR(BindFailure(address, where, errno));
  }
  return Status::Ok();
}

}  // namespace kolo::transport
