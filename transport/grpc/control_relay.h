// ControlRelay: an aggregator between a group of ranks and the controller (docs/DESIGN-NOTES.md,
// "Control relays"; docs/SCALE.md). Its members open their control streams to it as to the
// controller (GrpcControlChannel, the same admission handshake with the job's secret); it holds
// one stream to the controller for them all (RelayUplink), so that the controller reads and
// writes one message per relay a step instead of one per rank. Up: members' request batches
// gathered (RelayUplink); Hellos, shutdown notices, pings and ends passed on per rank, in order.
// Down: what the controller sends a relay is forwarded to its members unchanged, once encoded.
// Failures: a member's stream ending reaches the controller as that rank's loss with the relay's
// reason; the relay's stream to the controller ending aborts its members with a message naming
// the relay (and the controller loses all of them).
// Threading: Start, port and Stop from the owner's thread; the handler methods run on the
// relay server's completion-queue thread, the uplink's on its own threads.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/controller_link.h"
#include "core/logging.h"
#include "kolo/status.h"
#include "transport/deadline.h"
#include "transport/grpc/control_auth.h"

namespace kolo::transport {

class GrpcControlServer;
class RelayUplink;

struct RelayOptions {
  std::string controller_address;              // the controller's "host:port"
  std::string listen_address = "127.0.0.1:0";  // where members connect (port 0: any free)
  int host_rank = 0;                           // the rank whose process runs it (named in messages)
  int first_member = 0;  // members: ranks first_member .. first_member + members - 1
  int members = 0;
  int size = 0;                // the job's ranks
  std::string host;            // for its Hello
  double timeout_seconds = 0;  // KOLO_TIMEOUT_SECONDS: keepalive and deadlines on both hops
  double cycle_seconds = 0;    // KOLO_CYCLE_TIME: the longest a request batch waits
  ControlSecurity security;    // the job's
  Logger logger;               // null: a "control-relay" logger at warning level
};

class ControlRelay final : public ControllerHandler {
 public:
  // Listens for the members and connects to the controller by `deadline`.
  static StatusOr<std::unique_ptr<ControlRelay>> Start(RelayOptions options, SteadyTime deadline);
  ~ControlRelay() override;  // Stop(now)

  int port() const;
  // Waits until every member ended its stream or `deadline` (then cancels the rest), then
  // closes the stream to the controller. Idempotent.
  void Stop(SteadyTime deadline);

  // ControllerHandler, for the members' streams.
  Status OnHello(const Hello& hello) override;
  void OnMessage(int rank, const WorkerMessage& message) override;
  void OnStreamClosed(int rank, const Status& why) override;

 private:
  explicit ControlRelay(RelayOptions options);
  // The stream to the controller ended: every member is told, with the reason.
  void UplinkLost(const Status& why);

  const RelayOptions options_;
  std::unique_ptr<GrpcControlServer> server_;  // members' streams; set in Start
  std::unique_ptr<RelayUplink> uplink_;        // destroyed first
};

}  // namespace kolo::transport
