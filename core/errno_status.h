// The one converter from errno values to kolo::Status, for every system call kolo makes:
// the data mesh's sockets and eventfds (transport/) and the timeline's file (core/).
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "kolo/status.h"

namespace kolo {

// "<context>: Connection refused (ECONNREFUSED)", with a code that says what kind of failure
// it is: Unavailable for connection failures, DeadlineExceeded for ETIMEDOUT, InvalidArgument
// for bad addresses, Internal otherwise.
Status ErrnoToStatus(int err, const std::string& context);

// "Connection refused (ECONNREFUSED)".
std::string ErrnoText(int err);

// True for the errno values that mean the peer closed or reset the connection.
bool IsConnectionClosed(int err);

}  // namespace kolo
