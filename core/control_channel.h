// ControlChannel: a worker's end of its control stream to the controller (DESIGN.md §2).
// Implemented by transport/ over gRPC, and by LocalControlChannel for the rank whose process
// hosts the controller; driven by the background thread.
//
// Threading: Connect, Send and Close are called by the background thread only. Incoming
// messages are queued by the implementation's own reader thread; TryReceive (background thread)
// drains them, and the `wake` function given to Connect is called (from the reader thread, under
// no kolo lock) whenever a message or a stream failure arrives.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/messages.h"
#include "kolo/status.h"

namespace kolo {

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;

  // Opens the stream, sends `hello` and blocks until the controller's Welcome arrives (it is
  // sent once every rank has said hello) or `deadline` passes. Returns the peer table.
  virtual StatusOr<std::vector<PeerInfo>> Connect(const Hello& hello,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::function<void()> wake) = 0;

  // `on_fatal` runs on the reader thread, under no kolo lock, as soon as an Abort arrives or
  // the stream breaks before a Shutdown: the background thread may be blocked in a data-plane
  // exchange, and this lets its owner interrupt that exchange at once instead of waiting for
  // its deadline. Call before Connect.
  virtual void SetFatalHandler(std::function<void(const Status&)> on_fatal) = 0;

  // Queues one message on the stream. Does not wait for the controller. Fails once the
  // stream is broken.
  virtual Status Send(const WorkerMessage& message) = 0;

  // Returns the next received message, nullopt if none is waiting. A broken stream is an
  // error status naming the controller (returned once every queued message was drained).
  virtual StatusOr<std::optional<ControllerMessage>> TryReceive() = 0;

  // Half-closes and tears the stream down; waits at most `deadline` for the reader thread.
  // Idempotent.
  virtual void Close(std::chrono::steady_clock::time_point deadline) = 0;

  // The job generation the Welcome carried (it binds the data mesh's handshakes); valid after
  // a successful Connect.
  virtual std::string generation() const = 0;
};

// What Connect returns for the first message a rank receives: the peer table of a Welcome, or
// the refusal of an Abort. `controller` names it in messages ("the controller at host:port").
StatusOr<std::vector<PeerInfo>> PeersFromFirstMessage(ControllerMessage first,
                                                      const std::string& controller, int rank);

}  // namespace kolo
