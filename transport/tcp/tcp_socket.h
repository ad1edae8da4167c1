// TCP socket primitives of the data mesh: "host:port" parsing, resolution, a non-blocking
// listener, non-blocking connect and accept, and socket tuning (send and recv are in
// transport/socket_io.h). Used by TcpMesh and its helpers on the thread that owns the sockets.
// Stateless functions; thread-safe.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <string>

#include "kolo/status.h"
#include "transport/socket_io.h"  // SendSome, RecvSome
#include "transport/unique_fd.h"

namespace kolo::transport {

// Socket buffer size asked for on every data socket (the kernel may cap it).
constexpr int kSocketBufferBytes = 4 << 20;

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  std::string ToString() const;  // "ip:port", "[v6]:port"
};

// Splits "host:port" or "[v6-host]:port". The port must be 0..65535.
Status ParseHostPort(const std::string& address, std::string* host, int* port);
// Inverse of ParseHostPort: brackets a host that contains ':'.
std::string JoinHostPort(const std::string& host, int port);
// True for "0.0.0.0", "::" and "": addresses a peer cannot connect to.
bool IsWildcardHost(const std::string& host);

// Resolves `host` (numeric or a name; may block on DNS) to its first TCP address.
StatusOr<SocketAddress> ResolveAddress(const std::string& host, int port);

// A non-blocking, close-on-exec listener on host:port (port 0: any free port, reported in
// `*bound_port`). Accepted sockets inherit the data-socket buffer sizes.
StatusOr<UniqueFd> ListenOn(const std::string& host, int port, int* bound_port);

// Starts a non-blocking connect() to `address` on a tuned data socket. The connection is
// complete when the fd is writable and PendingSocketError() is 0.
StatusOr<UniqueFd> StartConnect(const SocketAddress& address);

// Accepts one pending connection as a non-blocking socket (tune it with TuneDataSocket); an
// invalid fd (and OK) when none is pending. `remote` receives "ip:port" of the peer.
StatusOr<UniqueFd> AcceptOne(int listen_fd, std::string* remote);

// TCP_NODELAY and kSocketBufferBytes send/receive buffers.
Status TuneDataSocket(int fd);

// The socket's pending error (SO_ERROR), 0 if none.
int PendingSocketError(int fd);

}  // namespace kolo::transport
