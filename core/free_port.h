// PickControllerPort: a TCP port for a controller that starts a little later (kolorun picks one
// per job, tests per local job). Thread-safe; no state.
#pragma once

#include "kolo/status.h"

namespace kolo {

// A port on 127.0.0.1 that nothing is bound to right now, chosen outside the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): a port from inside it could be taken by any
// outgoing connection or bind(0) of this or another process before the controller binds it.
// What remains is a race with processes that bind explicit ports, which the controller reports
// as "address in use". Falls back to a port the kernel picks if the range leaves no room.
StatusOr<int> PickControllerPort();

}  // namespace kolo
