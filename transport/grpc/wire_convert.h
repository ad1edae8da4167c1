// Conversions between the plain structs of core/messages.h and the generated kolo::wire types:
// the one place where protobuf meets kolo. Internal to transport/grpc/: included only by its
// .cc files and tests. Pure functions; thread-safe.
#pragma once

#include "core/messages.h"
#include "kolo/status.h"
#include "proto/kolo.pb.h"

namespace kolo::transport {

// A request batch's consecutive ascending cache ids travel as one bit vector (IdRun) each.
wire::WorkerMessage ToWire(const WorkerMessage& message);
// Every response in full: names, cache ids and element counts.
wire::ControllerMessage ToWire(const ControllerMessage& message);
// One response in full.
void ToWire(const Response& response, wire::Response* out);
// `response` by its cache ids alone (protocol 7, docs/PROTOCOL.md "Cached ops by bit vector"):
// for a response whose every id the receiver was told by an earlier one (ResponseNames).
void ToWireById(const Response& response, wire::Response* out);

// Fail (InvalidArgument) on a message whose kind is unset, a request that is neither full
// metadata nor non-zero cache ids, or a malformed bit vector of ids (id_runs.h). Enum values
// pass through unchecked: the controller validates them and reports mismatches with both
// values. A response by id comes back with its cache ids only: ResponseNames::Fill adds the
// names and element counts.
StatusOr<WorkerMessage> FromWire(const wire::WorkerMessage& message);
// The same into *out, whose storage it reuses (the controller's server, once per message): its
// requests' slots too, so *out must be empty or filled by this function before (a request
// with a cache id is taken to have default metadata).
Status FromWire(const wire::WorkerMessage& message, WorkerMessage* out);
StatusOr<ControllerMessage> FromWire(const wire::ControllerMessage& message);

}  // namespace kolo::transport
