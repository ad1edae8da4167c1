// The seam between the controller's transport (a gRPC service in transport/) and its logic
// (controller/). The transport calls a ControllerHandler for every event on a worker stream,
// and the controller answers through the ControllerOutbox the transport provides.
//
// Threading: the transport calls the handler from its own threads (one per stream, several at
// once); the handler must be thread-safe. Outbox methods may be called from any thread and
// never block on the network (messages are queued per stream).
#pragma once

#include "core/messages.h"
#include "kolo/status.h"

namespace kolo {

class ControllerOutbox {
 public:
  virtual ~ControllerOutbox() = default;
  // Queues `message` for `rank`'s stream. Dropped (and logged) if that stream is gone.
  virtual void Send(int rank, const ControllerMessage& message) = 0;
  // Queues `message` for ranks 0..size-1. An outbox whose ranks can act on a message in a way
  // that affects the others' copies (rank 0 stops the transport once it has read a Shutdown)
  // orders the copies so that none is lost (LocalControlChannel).
  virtual void SendToAll(int size, const ControllerMessage& message) {
    SendToEach(size, /*skip=*/-1, message);
  }
  // Queues `message` for ranks 0..size-1 except `skip` (-1: none), one Send each unless the
  // outbox overrides it: the gRPC server encodes the message once for every copy, so that a
  // broadcast of N copies costs one encoding, not N (docs/SCALE.md).
  virtual void SendToEach(int size, int skip, const ControllerMessage& message) {
    for (int rank = 0; rank < size; ++rank) {
      if (rank != skip) Send(rank, message);
    }
  }
};

class ControllerHandler {
 public:
  virtual ~ControllerHandler() = default;
  // A worker sent Hello. A non-OK status refuses the stream with that message: Unavailable
  // for now (the worker tries again until its start timeout), any other code for good (the
  // transport sends it as an Abort and closes the stream). docs/PROTOCOL.md, "Joining".
  virtual Status OnHello(const Hello& hello) = 0;
  // Any later message from `rank`.
  virtual void OnMessage(int rank, const WorkerMessage& message) = 0;
  // `rank`'s stream ended: after its shutdown notice (clean) or not (`why` says how).
  virtual void OnStreamClosed(int rank, const Status& why) = 0;
};

}  // namespace kolo
