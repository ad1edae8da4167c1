// AsyncSessionStream: one Session stream of gRPC's asynchronous server API, presented as a
// reactor (StartRead / StartWrite / Finish, and OnReadDone / OnWriteDone / OnDone), so that
// ControlSession reads like a callback reactor while the whole server runs on one completion
// queue that one thread drives (control_sessions.h): gRPC's callback API hands every event
// from the polling thread to another (a futex and a thread switch per message, a sixth of the
// controller's CPU at 1,024 ranks; docs/SCALE.md), one thread does not.
// Threading: the reactions run on the completion queue's thread, one at a time. StartRead,
// StartWrite and Finish may be called from any thread, at most one read and one write in
// flight, and Finish only with no write in flight; the stream deletes itself (OnDone) once
// gRPC has returned every operation it started.
#pragma once

#include <grpcpp/grpcpp.h>

#include "core/mutex.h"
#include "proto/kolo.grpc.pb.h"

namespace kolo::transport {

// The Session method of the Controller service, raw: messages are ByteBuffers.
using RawSessionService = wire::Controller::WithRawMethod_Session<wire::Controller::Service>;

class AsyncSessionStream {
 public:
  AsyncSessionStream(RawSessionService* service, grpc::ServerCompletionQueue* cq);
  virtual ~AsyncSessionStream() = default;
  AsyncSessionStream(const AsyncSessionStream&) = delete;
  AsyncSessionStream& operator=(const AsyncSessionStream&) = delete;

  // Asks gRPC for the next Session stream; OnStart runs when one opens, or the stream is
  // deleted when the server shuts down first.
  void Accept();
  // The completion queue's thread calls this with every tag it gets from the queue.
  static void Dispatch(void* tag, bool ok);

  grpc::ServerContext* context() { return &context_; }

 protected:
  void StartRead(grpc::ByteBuffer* message) KOLO_EXCLUDES(ops_mu_);
  void StartWrite(const grpc::ByteBuffer* message) KOLO_EXCLUDES(ops_mu_);
  void Finish(const grpc::Status& status) KOLO_EXCLUDES(ops_mu_);

  virtual void OnStart() = 0;
  virtual void OnReadDone(bool ok) = 0;
  virtual void OnWriteDone(bool ok) = 0;
  // Every operation returned: the stream may delete itself.
  virtual void OnDone() = 0;

 private:
  enum class Op { kAccept, kRead, kWrite, kFinish, kDone };
  struct Tag {
    AsyncSessionStream* stream;
    Op op;
  };
  void Complete(Op op, bool ok);
  // Counts an operation started; false when Finish already ran (the operation is skipped).
  bool Begin() KOLO_EXCLUDES(ops_mu_);
  // Counts an operation returned; whether that was the last one.
  bool End() KOLO_EXCLUDES(ops_mu_);

  RawSessionService* const service_;
  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_{&context_};
  Tag accept_tag_{this, Op::kAccept};
  Tag read_tag_{this, Op::kRead};
  Tag write_tag_{this, Op::kWrite};
  Tag finish_tag_{this, Op::kFinish};
  Tag done_tag_{this, Op::kDone};

  Mutex ops_mu_;
  int in_flight_ KOLO_GUARDED_BY(ops_mu_) = 0;      // operations started and not returned
  bool finished_ KOLO_GUARDED_BY(ops_mu_) = false;  // Finish was called
};

}  // namespace kolo::transport
