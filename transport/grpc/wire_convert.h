// Conversions between the plain structs of core/messages.h and the generated kolo::wire types:
// the one place where protobuf meets kolo. Internal to transport/grpc/: included only by its
// .cc files and tests. Pure functions; thread-safe.
#pragma once

#include "core/messages.h"
#include "kolo/status.h"
#include "proto/kolo.pb.h"

namespace kolo::transport {

wire::WorkerMessage ToWire(const WorkerMessage& message);
wire::ControllerMessage ToWire(const ControllerMessage& message);

// Fail (InvalidArgument) on a message whose kind is unset or a request that is neither full
// metadata nor a non-zero cache id. Enum values pass through unchecked: the controller
// validates them and reports mismatches with both values.
StatusOr<WorkerMessage> FromWire(const wire::WorkerMessage& message);
StatusOr<ControllerMessage> FromWire(const wire::ControllerMessage& message);

}  // namespace kolo::transport
