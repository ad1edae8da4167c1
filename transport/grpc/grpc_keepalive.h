// gRPC channel arguments shared by the controller's server and the workers' channels:
// keepalive pings derived from KOLO_TIMEOUT_SECONDS so that a vanished host is noticed within
// that time, ping permissions that match on both sides, fast reconnects, message size limits.
// Internal to transport/grpc/ (included only by its .cc files). Pure functions; thread-safe.
#pragma once

#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>

namespace kolo::transport {

// The largest legitimate control messages are a worker's first RequestBatch and the
// ResponseBatch answering it: one full request (~100 bytes plus the name) per tensor of the
// model, with no cap on the count. 64 MiB fits a few hundred thousand tensors, beyond gRPC's
// 4 MiB default. It is also all a stream can make gRPC buffer before it has authenticated: a
// longer message is refused by its length prefix (docs/SECURITY.md).
constexpr int kMaxControlMessageBytes = 64 << 20;

struct KeepaliveTimes {
  int ping_interval_ms;  // GRPC_ARG_KEEPALIVE_TIME_MS
  int ping_timeout_ms;   // GRPC_ARG_KEEPALIVE_TIMEOUT_MS
};
// A ping every quarter of the timeout, answered within the timeout: a silent peer is given up
// between 1x and 1.25x the timeout after it fell silent, never earlier (a slow peer is not a
// dead one), and soon enough after the data plane's own timeout that workers can wait for
// the controller's verdict, which names the silent rank (docs/RELIABILITY.md, scenario 2).
KeepaliveTimes KeepaliveFor(double timeout_seconds);

grpc::ChannelArguments WorkerChannelArguments(double timeout_seconds);
void ApplyServerArguments(double timeout_seconds, grpc::ServerBuilder* builder);

}  // namespace kolo::transport
