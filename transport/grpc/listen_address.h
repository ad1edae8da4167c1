// The controller's listen address ("host:port", KOLO_CONTROLLER) resolved to sockets, and the
// one-sentence reasons a bind fails for. Used by the FrontDoor, which binds the address itself,
// and by the TLS path, where gRPC binds it: ProbeListenAddress binds it once first so that a
// port in use is said in one sentence instead of the error dump gRPC 1.51 writes to stderr.
// Pure functions over the socket API; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

// Binds and listens on every address `address` resolves to (both 0.0.0.0 and :: for an empty
// host, the IPv6 socket then IPv6-only so that the two can share the port), with SO_REUSEADDR
// and without SO_REUSEPORT; port 0 picks a free port, shared by every socket. The sockets are
// non-blocking and close-on-exec; `*port` gets the port. A port in use, a host that is not
// this host's and a privileged port each fail in one sentence naming KOLO_CONTROLLER.
// "unix-abstract:NAME" (gRPC's spelling; a control relay's, runtime/control_relays.h) binds
// one Unix-domain socket in the abstract namespace instead, `*port` 0; a name in use fails in
// one sentence.
StatusOr<std::vector<UniqueFd>> ListenOn(const std::string& address, int* port);

// Whether `address` is a "unix-abstract:NAME" address (it has no port).
bool IsUnixAbstractAddress(const std::string& address);

// Binds (and closes) a socket on each address `address` (port not 0) resolves to, as gRPC's
// listener will, and fails as ListenOn would. OK when the address does not parse or resolve,
// or has port 0: gRPC then says why.
Status ProbeListenAddress(const std::string& address);

}  // namespace kolo::transport
