// GrpcControlChannel: a worker's end of its control stream to the controller (DESIGN.md §2),
// over gRPC. Created and driven by the runtime's background thread.
// Threading: Connect, Send, TryReceive and Close are called by the background thread only. One
// reader thread per stream, started by Connect and joined by Close (or the destructor; or by
// Connect itself when that attempt failed and it tries a new stream), queues incoming
// messages and calls `wake` after each one and after the stream ends. The reader also answers
// the controller's Challenge (control_auth.h), after checking the controller's own proof.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/control_channel.h"
#include "core/logging.h"
#include "kolo/status.h"
#include "transport/grpc/control_auth.h"

namespace kolo::transport {

class GrpcControlChannel final : public ControlChannel {
 public:
  // Does not touch the network. `timeout_seconds` (KOLO_TIMEOUT_SECONDS) sets keepalive so
  // that a vanished controller host is noticed within it. A null logger gets a
  // "control-channel" logger at warning level. `security`: the job's credentials and the CA
  // to verify a TLS controller with (a CA file that cannot be read fails Connect).
  static std::unique_ptr<GrpcControlChannel> Create(const std::string& controller_address,
                                                    double timeout_seconds, Logger logger,
                                                    const ControlSecurity& security = {});
  // Close(now): cancels the stream at once if it is still open.
  ~GrpcControlChannel() override;

  // See ControlChannel. Waits for the controller to accept connections (it may start after
  // this worker), opens the stream, sends `hello` and waits for the Welcome. A stream that
  // ends before the Welcome with UNAVAILABLE or CANCELLED (a controller that is stopping, or
  // whose job is over: the previous job's, when init() follows shutdown()) is retried on a
  // new stream until `deadline`, like a refused connection; the error at the deadline names
  // the last such refusal. An Abort instead of the Welcome fails at once with the
  // controller's reason; so does a controller that cannot prove it holds the job secret
  // (docs/PROTOCOL.md, "Joining"). On failure the stream is torn down.
  StatusOr<std::vector<PeerInfo>> Connect(const Hello& hello,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::function<void()> wake) override;
  void SetFatalHandler(std::function<void(const Status&)> on_fatal) override;
  // Writes `message` on the stream; blocks only while gRPC flow control holds it back.
  Status Send(const WorkerMessage& message) override;
  StatusOr<std::optional<ControllerMessage>> TryReceive() override;
  // Half-closes the stream, waits until `deadline` for the controller to end it, then cancels;
  // joins the reader thread. Idempotent.
  void Close(std::chrono::steady_clock::time_point deadline) override;

  // See ControlChannel. Background thread.
  std::string generation() const override;

 private:
  class Impl;
  explicit GrpcControlChannel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;  // constant after construction
};

}  // namespace kolo::transport
