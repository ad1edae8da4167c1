#include "transport/grpc/grpc_keepalive.h"

#include <grpc/grpc.h>

#include <algorithm>

namespace kolo::transport {

KeepaliveTimes KeepaliveFor(double timeout_seconds) {
  const int timeout_ms = std::max(100, static_cast<int>(timeout_seconds * 1000));
  return {std::max(100, timeout_ms / 4), timeout_ms};
}

grpc::ChannelArguments WorkerChannelArguments(double timeout_seconds) {
  const KeepaliveTimes keepalive = KeepaliveFor(timeout_seconds);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive.ping_interval_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive.ping_timeout_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Keep pinging an idle stream: an idle job has no data frames for long stretches.
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // The controller may start after its workers: retry often while waiting for it.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // One connection per worker, even for several workers in one process.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // No bandwidth probing: control messages are small, and a probe ping per burst of them
  // costs both ends a write and a wake-up (docs/SCALE.md).
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);  // nothing reads it (as on the controller's side)
  args.SetMaxReceiveMessageSize(kMaxControlMessageBytes);
  args.SetMaxSendMessageSize(kMaxControlMessageBytes);
  return args;
}

void ApplyServerArguments(double timeout_seconds, grpc::ServerBuilder* builder) {
  const KeepaliveTimes keepalive = KeepaliveFor(timeout_seconds);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive.ping_interval_ms);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive.ping_timeout_ms);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Accept the workers' pings (sent every ping_interval_ms) instead of answering GOAWAY.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              keepalive.ping_interval_ms / 2);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // A connection with no call open for the timeout is closed (GOAWAY, then the socket): one
  // that never opens a stream, or whose stream was refused, cannot hold a descriptor for
  // good. A worker's control stream stays open for the whole job, so it is never idle.
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, keepalive.ping_timeout_ms);
  // No bandwidth probing (as on the workers' side): with a thousand streams of small messages,
  // probe pings were a write and a wake-up each.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // No channelz: nothing reads it, and it counted every message of every stream in its own
  // counters (1.3% of the controller's CPU at 1,024 ranks; docs/SCALE.md).
  builder->AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
  // Two controllers on one port would split the job silently.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder->SetMaxReceiveMessageSize(kMaxControlMessageBytes);
  builder->SetMaxSendMessageSize(kMaxControlMessageBytes);
}

}  // namespace kolo::transport
