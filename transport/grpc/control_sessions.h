// ControlSessions: every worker stream of the controller's server (GrpcControlServer's insides):
// the admitted ones by rank, the messages the controller sends them (encoded once per
// broadcast, cached tensors by id once every stream knows their names: response_names.h), and
// the deadlines of streams still in their handshake or flushing their last messages, which one
// reaper thread enforces by cancelling the stream. A control relay's stream (relay_intake.h)
// stands for its members: they are admitted under their ranks with the relay's session, and
// what the controller sends them goes out on it once per message (relay_routes.h). Each stream is a
// ControlSession (control_session.h), a reactor over gRPC's asynchronous API that calls back in
// here; one thread (Serve) drives the server's one completion queue, and so runs every stream's
// reactions and the handler calls they make.
// Threading: every method may be called from any thread: the completion queue's, the
// controller's (Send, SendToEach) and the server's owner (Stop...). mu_ guards the streams and
// the name book and is taken before a session's own lock; the deadlines are the reaper's
// (session_reaper.h). No lock of this class is held while the
// ControllerHandler is called.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/controller_link.h"
#include "core/logging.h"
#include "core/mutex.h"
#include "transport/auth/refusal_log.h"
#include "transport/deadline.h"
#include "transport/grpc/control_auth.h"
#include "transport/grpc/control_session.h"
#include "transport/grpc/relay_routes.h"
#include "transport/grpc/response_names.h"
#include "transport/grpc/session_reaper.h"

namespace kolo::transport {

class ControlSessions {
 public:
  struct Config {
    ControllerHandler* handler = nullptr;  // must outlive this
    double timeout_seconds = 0;            // handshake and flush deadlines
    Logger logger;
    ControlSecurity security;
    std::function<std::string(const std::string&)> peer_name;  // gRPC's peer -> for logs
    RawSessionService* service = nullptr;                      // must outlive this
    grpc::ServerCompletionQueue* cq = nullptr;                 // must outlive this; Serve drives it
  };
  ControlSessions(Config config, std::string generation);
  ~ControlSessions();  // the reaper stops and joins if ShutDownQueue did not

  // Starts the completion queue's thread, which accepts streams and runs their reactions until
  // the queue is shut down and drained (ShutDownQueue). Once, after the server started.
  void Serve();
  // Readies a session for the next stream gRPC opens (each accepted stream asks for the next).
  void AcceptNext();

  // Queues `message` for `rank`'s stream; dropped and logged when it has none or it closes.
  void Send(int rank, const ControllerMessage& message) KOLO_EXCLUDES(mu_);
  // Encodes `message` once and queues it for ranks 0..size-1 but `skip`.
  void SendToEach(int size, int skip, const ControllerMessage& message) KOLO_EXCLUDES(mu_);

  // Refuses new streams and messages, waits until every admitted stream ended or `deadline`,
  // then cancels the rest.
  void StopStreams(SteadyTime deadline) KOLO_EXCLUDES(mu_);
  // Cancels every stream still in its handshake or flush and ends the reaper's loop.
  void StopHandshakes();
  // After StopHandshakes and the server's Shutdown: waits until every session, the one
  // awaiting the next stream included, has run its last reaction (or `deadline`: false), and
  // only then shuts the queue down (gRPC aborts the process when a reaction starts a read,
  // write or finish on a queue already shut down); joins Serve's thread and the reaper's.
  // Messages sent later are dropped (StopStreams).
  bool ShutDownQueue(SteadyTime deadline) KOLO_EXCLUDES(mu_);

  // For ControlSession.
  const Config& config() const { return config_; }
  RefusalLog& refusals() { return refusals_; }
  // Admits `session` under its Hello's rank: Unavailable while stopping, FailedPrecondition
  // when the rank has a stream already.
  Status Register(ControlSession* session) KOLO_EXCLUDES(mu_);
  void Unregister(ControlSession* session) KOLO_EXCLUDES(mu_);
  // A control relay's member `rank` (relay_intake.h): its messages go out on `relay`'s stream.
  // Errors as Register's.
  Status RegisterRelayed(int rank, ControlSession* relay) KOLO_EXCLUDES(mu_);
  // Whether `rank` was `relay`'s member (it is not any more).
  bool UnregisterRelayed(int rank, ControlSession* relay) KOLO_EXCLUDES(mu_);
  // A control relay's server (control_relay.h): queues the encoded `message` unchanged for
  // `ranks` (empty: every admitted stream).
  void Forward(const std::vector<int>& ranks, const std::string& message) KOLO_EXCLUDES(mu_);
  bool stopping() const KOLO_EXCLUDES(mu_);
  // A session ran its last reaction (ControlSession::OnDone, before it deletes itself).
  void SessionEnded() KOLO_EXCLUDES(mu_);
  // The wire form of one stream's message (a Welcome gets the generation).
  static Encoded Encode(const wire::ControllerMessage& message);
  Encoded Encode(const ControllerMessage& message) const;
  // The reaper cancels `session` at `deadline` (replacing an earlier one) until Forget.
  void SetDeadline(ControlSession* session, SteadyTime deadline, bool flushing);
  void ClearDeadline(ControlSession* session);
  // When a stream closing now must have written its queue: the timeout, or Stop's deadline.
  SteadyTime FlushDeadline() const KOLO_EXCLUDES(mu_);

 private:
  // `message` for every target of a broadcast; responses by id when `every_stream` admitted
  // is one of them (so every stream holds the names told before).
  wire::ControllerMessage WireForEachLocked(bool every_stream, const ControllerMessage& message)
      KOLO_REQUIRES(mu_);
  void LogDropped(const ControllerMessage& message, int rank, const char* because) const;

  const Config config_;
  const std::string generation_;
  RefusalLog refusals_;  // thread-safe
  SessionReaper reaper_;
  std::thread queue_thread_;  // Serve

  mutable Mutex mu_;
  std::unordered_map<int, ControlSession*> streams_ KOLO_GUARDED_BY(mu_);  // admitted, by rank
  ResponseNames told_ KOLO_GUARDED_BY(mu_);  // what every admitted stream was told
  std::vector<ControlSession*> targets_ KOLO_GUARDED_BY(mu_);  // SendToEach's scratch
  RelayRoutes relays_ KOLO_GUARDED_BY(mu_);  // the relays' streams, by their members
  bool stopping_ KOLO_GUARDED_BY(mu_) = false;
  SteadyTime stop_deadline_ KOLO_GUARDED_BY(mu_);
  int live_ KOLO_GUARDED_BY(mu_) = 0;  // sessions made by AcceptNext and not yet ended
  CondVar drained_;                    // with mu_: a stream or a session ended
};

}  // namespace kolo::transport
