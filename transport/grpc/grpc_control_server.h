// GrpcControlServer: the controller's end of the control plane (DESIGN.md §2), a gRPC service
// started in rank 0's process. It runs one Session stream per worker and turns each stream's
// events into ControllerHandler calls; the controller answers through its ControllerOutbox side.
// A stream reaches the handler only after the HMAC challenge-response of control_auth.h; until
// then it holds no rank slot and nothing larger than one bounded gRPC message, and it is
// cancelled if it has not proven itself within the timeout. Refusals are logged rate-limited.
// Without TLS the port is kolo's FrontDoor (front_door.h), which hands gRPC only connections
// that sent the HTTP/2 preface; with TLS, gRPC's own listener accepts.
// Threading: every stream is a reactor over gRPC's asynchronous API (control_session.h) on one
// completion queue, which one thread drives: no thread per stream. Send and Stop may be called
// from any thread (Send never blocks on the network); handler callbacks arrive on the queue's
// thread, one at a time, under no lock of this class. One reaper thread cancels streams past
// their handshake or flush deadline, and without TLS the front door's accept thread hands
// connections over; Start starts the three, Stop joins them.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/controller_link.h"
#include "core/logging.h"
#include "kolo/status.h"
#include "transport/grpc/control_auth.h"

namespace kolo::transport {

class GrpcControlServer final : public ControllerOutbox {
 public:
  // Listens on `listen_address` ("host:port"; port 0 picks a free one; or, without TLS,
  // "unix-abstract:NAME", a control relay's, whose port() is 0) and starts serving.
  // `handler` must outlive the server. `timeout_seconds` (KOLO_TIMEOUT_SECONDS) sets keepalive,
  // so that a vanished worker host is noticed within it, and bounds how long a closing stream
  // may take to flush, and how long a new stream may take to authenticate. A null logger gets
  // a "controller-rpc" logger at warning level. `security`: the job's credentials (streams
  // that cannot prove them are refused) and optional TLS files (a file that cannot be read
  // fails Start naming its variable). `job_size`: the ranks expected, so that their burst of
  // connections at start is admitted whole (FrontDoor::kMaxPending); 0 when not known.
  static StatusOr<std::unique_ptr<GrpcControlServer>> Start(const std::string& listen_address,
                                                            ControllerHandler* handler,
                                                            double timeout_seconds, Logger logger,
                                                            const ControlSecurity& security = {},
                                                            int job_size = 0);
  // Stop(now): pending messages are not flushed; call Stop with a deadline first for that.
  ~GrpcControlServer() override;

  int port() const;
  // The job generation, random per server; every Welcome carries it.
  const std::string& generation() const;

  // Queues `message` for `rank`'s stream; dropped (and logged) if that rank has no stream or
  // the server is stopping. Never blocks on the network. Any thread, including handler calls.
  void Send(int rank, const ControllerMessage& message) override;
  // Encodes `message` once and queues that one encoding for each rank (controller_link.h).
  // While every admitted stream gets it, a response whose cached tensors every stream was
  // told by name goes by their ids alone (docs/PROTOCOL.md, "Cached ops by bit vector").
  void SendToEach(int size, int skip, const ControllerMessage& message) override;

  // For a control relay (control_relay.h): queues `message`, a ControllerMessage already
  // encoded, unchanged for `ranks` (empty: every admitted stream). Any thread.
  void Forward(const std::vector<int>& ranks, const std::string& message);

  // Stops accepting streams and waits until every worker has ended its stream (queued
  // messages keep flowing meanwhile) or `deadline` passes; then cancels the remaining streams
  // (their workers see a lost stream; the handler gets OnStreamClosed) and joins every thread.
  // Idempotent; blocks until done. Do not call from a handler callback.
  void Stop(std::chrono::steady_clock::time_point deadline);

 private:
  class Impl;
  explicit GrpcControlServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;  // constant after construction
};

}  // namespace kolo::transport
