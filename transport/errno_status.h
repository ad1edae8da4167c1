// The one converter from errno values to kolo::Status, for every socket and eventfd call of
// the data mesh (transport/tcp_socket.cc, mesh_connector.cc, stream_pump.cc).
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "kolo/status.h"

namespace kolo::transport {

// "<context>: Connection refused (ECONNREFUSED)", with a code that says what kind of failure
// it is: Unavailable for connection failures, DeadlineExceeded for ETIMEDOUT, InvalidArgument
// for bad addresses, Internal otherwise.
Status ErrnoToStatus(int err, const std::string& context);

// "Connection refused (ECONNREFUSED)".
std::string ErrnoText(int err);

// True for the errno values that mean the peer closed or reset the connection.
bool IsConnectionClosed(int err);

}  // namespace kolo::transport
