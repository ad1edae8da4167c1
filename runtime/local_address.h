// Helpers the composition root uses to describe this process to its peers: the address of the
// interface that routes to the controller and the host name. Pure functions over the OS;
// thread-safe.
#pragma once

#include <string>

#include "kolo/status.h"

namespace kolo {

// The local IP address the kernel would use to reach `host` ("127.0.0.1" for loopback).
// Sends nothing: a UDP socket is connected and asked for its own address.
StatusOr<std::string> LocalAddressRouting(const std::string& host);

// The name of the network interface that holds IP address `address` ("lo" for 127.0.0.1),
// from getifaddrs(); InvalidArgument when no interface has it.
StatusOr<std::string> InterfaceOfAddress(const std::string& address);

// gethostname(), or "localhost" if it fails.
std::string LocalHostName();

// Splits "host:port" (also "[v6]:port"). Fails with a message naming `what`.
Status SplitHostPort(const std::string& address, const std::string& what, std::string* host,
                     int* port);

}  // namespace kolo
