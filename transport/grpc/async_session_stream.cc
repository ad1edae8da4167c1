#include "transport/grpc/async_session_stream.h"

namespace kolo::transport {

AsyncSessionStream::AsyncSessionStream(RawSessionService* service, grpc::ServerCompletionQueue* cq)
    : service_(service), cq_(cq) {}

void AsyncSessionStream::Accept() {
  {
    MutexLock lock(&ops_mu_);
    in_flight_ = 1;  // the accept; once it returns, the done notice in its place
  }
  context_.AsyncNotifyWhenDone(&done_tag_);
  service_->RequestSession(&context_, &stream_, cq_, cq_, &accept_tag_);
}

void AsyncSessionStream::Dispatch(void* tag, bool ok) {
  Tag* t = static_cast<Tag*>(tag);
  t->stream->Complete(t->op, ok);
}

bool AsyncSessionStream::Begin() {
  MutexLock lock(&ops_mu_);
  if (finished_) return false;
  ++in_flight_;
  return true;
}

bool AsyncSessionStream::End() {
  MutexLock lock(&ops_mu_);
  --in_flight_;
  return in_flight_ == 0 && finished_;
}

void AsyncSessionStream::StartRead(grpc::ByteBuffer* message) {
  if (Begin()) stream_.Read(message, &read_tag_);
}

void AsyncSessionStream::StartWrite(const grpc::ByteBuffer* message) {
  if (Begin()) stream_.Write(*message, &write_tag_);
}

void AsyncSessionStream::Finish(const grpc::Status& status) {
  {
    MutexLock lock(&ops_mu_);
    if (finished_) return;
    finished_ = true;
    ++in_flight_;
  }
  stream_.Finish(status, &finish_tag_);
}

void AsyncSessionStream::Complete(Op op, bool ok) {
  switch (op) {
    case Op::kAccept:
      // Not accepted: the server is shutting down, and the call never started (gRPC then never
      // returns the done notice either).
      if (!ok) return OnDone();
      OnStart();
      return;  // the accept's count now stands for the done notice
    case Op::kRead:
      OnReadDone(ok);
      break;
    case Op::kWrite:
      OnWriteDone(ok);
      break;
    case Op::kFinish:
    case Op::kDone:
      break;
  }
  if (End()) OnDone();
}

}  // namespace kolo::transport
