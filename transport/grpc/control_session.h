// ControlSession: the controller's end of one worker's control stream, a reactor over gRPC's
// asynchronous API (async_session_stream.h; GrpcControlServer's insides). It runs the admission
// handshake (control_auth.h: Hello, Challenge, AuthProof), then hands each message to the
// ControllerHandler and writes the messages ControlSessions queues for it, one at a time, in order;
// when the worker's side ends it flushes what is queued, tells the handler, and finishes the RPC.
// Threading: the reactions run on the server's completion-queue thread. Reads are sequential (the
// next read starts at the end of the previous one's reaction), so the read-side state is theirs; a
// write reaction may run beside them, and Enqueue may be called from any thread, so the write
// queue and the end of the stream are guarded by the session's own lock, which is taken after
// ControlSessions' and never held while calling the handler or starting a gRPC operation.
// A control relay's stream is admitted without a rank of its own; its members' messages and
// their ends go to the handler through its RelayIntake (relay_intake.h).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <deque>
#include <memory>
#include <string>

#include "core/messages.h"
#include "core/mutex.h"
#include "kolo/status.h"
#include "proto/kolo.pb.h"
#include "transport/grpc/async_session_stream.h"

namespace kolo::transport {

class ControlSessions;
class RelayIntake;

// A message encoded once and shared by the queues of every stream it goes to.
using Encoded = std::shared_ptr<const grpc::ByteBuffer>;

class ControlSession final : public AsyncSessionStream {
 public:
  // Call Accept() next; once a stream opens, it asks `sessions` for the next one and reads the
  // Hello. `sessions` must outlive every session (the server's Shutdown makes sure). Deletes
  // itself when gRPC is done with it.
  ControlSession(ControlSessions* sessions, RawSessionService* service,
                 grpc::ServerCompletionQueue* cq);

  // Queues `message` and starts writing it if no write is in flight. nullptr when queued, else
  // why it was dropped. Any thread; never blocks on the network.
  const char* Enqueue(const Encoded& message) KOLO_EXCLUDES(mu_);
  // Messages queued and not yet written (for a log line).
  size_t queued() const KOLO_EXCLUDES(mu_);
  // The rank of its Hello; meaningful once it passed the handshake.
  int rank() const { return hello_.rank; }
  // Whether this is a control relay's stream (its Hello said so; relay_intake.h), which its
  // members' messages travel on. Set before the stream is admitted, constant after.
  bool relay() const { return relay_ != nullptr; }

 private:
  void OnStart() override;
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

  enum class Phase { kHello, kProof, kAdmitted, kEnded };
  // The reactions of the read side, by phase.
  void ReadHello(bool ok);
  void ReadProof(bool ok);
  void ReadMessage(bool ok);
  // Passes an authenticated Hello to the handler; the stream is then admitted or refused.
  void Admit();
  // Refuses a stream before it proved itself: logged rate-limited, an Abort, UNAUTHENTICATED.
  void RefuseUnauthenticated(const char* key, const std::string& reason);
  // Refuses an authenticated stream: an Unavailable `why` for now (UNAVAILABLE, which the worker
  // retries), any other for good (an Abort with the reason, FAILED_PRECONDITION).
  void Refuse(const Status& why);
  // The admitted stream's worker side ended with `closed` (OK after its shutdown notice).
  void EndAdmitted(const Status& closed);
  // Reads no more; finishes with `status` once the queue is written (or at the deadline,
  // when the reaper cancels the stream).
  void CloseAfterFlush(grpc::Status status);
  // Whether the stream should finish now (closing, nothing in flight); marks it finished.
  bool FinishNowLocked() KOLO_REQUIRES(mu_);
  // Unregisters an admitted stream, tells the handler, and finishes the RPC.
  void Complete();
  bool Parse(wire::WorkerMessage* out);
  std::string Peer();

  ControlSessions* const sessions_;

  // Read side: one read reaction at a time.
  Phase phase_ = Phase::kHello;
  grpc::ByteBuffer in_;
  Hello hello_;  // the authenticated Hello (rank_ from here)
  std::string worker_nonce_;
  std::string controller_nonce_;
  bool saw_shutdown_ = false;
  Status closed_;                       // why an admitted stream ended, for the handler
  std::shared_ptr<RelayIntake> relay_;  // a relay's stream: its members, read side only

  mutable Mutex mu_;
  std::deque<Encoded> queue_ KOLO_GUARDED_BY(mu_);
  // The write in flight: set under mu_ by whoever starts a write (writing_ false -> true), and
  // nobody touches it while writing_.
  Encoded writing_message_;
  bool writing_ KOLO_GUARDED_BY(mu_) = false;
  bool broken_ KOLO_GUARDED_BY(mu_) = false;    // a write failed: later messages are dropped
  bool admitted_ KOLO_GUARDED_BY(mu_) = false;  // registered with ControlSessions
  bool closing_ KOLO_GUARDED_BY(mu_) = false;   // finish once the queue is written
  bool finished_ KOLO_GUARDED_BY(mu_) = false;  // Complete has been or is being called
  grpc::Status final_status_ KOLO_GUARDED_BY(mu_);
};

}  // namespace kolo::transport
