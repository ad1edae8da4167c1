// The one converter from gRPC statuses to kolo::Status, for the control plane
// (transport/grpc/grpc_control_server.cc, transport/grpc/grpc_control_channel.cc). Internal to
// transport/grpc/: included only by its .cc files. Pure functions; thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "kolo/status.h"

namespace kolo::transport {

// "<context>: UNAVAILABLE: Socket closed", with the kolo code closest to the gRPC one; an OK
// gRPC status stays OK.
Status FromGrpcStatus(const grpc::Status& status, const std::string& context);

// "UNAVAILABLE: Socket closed", or "OK".
std::string GrpcStatusText(const grpc::Status& status);

}  // namespace kolo::transport
