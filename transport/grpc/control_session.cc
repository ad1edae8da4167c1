#include "transport/grpc/control_session.h"

#include "transport/grpc/control_sessions.h"
#include "transport/grpc/relay_intake.h"
#include "transport/grpc/wire_convert.h"

namespace kolo::transport {

ControlSession::ControlSession(ControlSessions* sessions, RawSessionService* service,
                               grpc::ServerCompletionQueue* cq)
    : AsyncSessionStream(service, cq), sessions_(sessions) {}

void ControlSession::OnStart() {
  sessions_->AcceptNext();
  sessions_->SetDeadline(
      this, AddSeconds(std::chrono::steady_clock::now(), sessions_->config().timeout_seconds),
      /*flushing=*/false);
  StartRead(&in_);
}

std::string ControlSession::Peer() {
  return sessions_->config().peer_name(context()->peer());
}

bool ControlSession::Parse(wire::WorkerMessage* out) {
  return grpc::SerializationTraits<wire::WorkerMessage>::Deserialize(&in_, out).ok();
}

void ControlSession::OnReadDone(bool ok) {
  try {
    switch (phase_) {
      case Phase::kHello:
        return ReadHello(ok);
      case Phase::kProof:
        return ReadProof(ok);
      case Phase::kAdmitted:
        return ReadMessage(ok);
      case Phase::kEnded:
        return;
    }
  } catch (const std::exception& e) {  // third-party code (gRPC, protobuf) at a thread boundary
    sessions_->config().logger->error("control stream handler failed: {}", e.what());
    const bool admitted = phase_ == Phase::kAdmitted;
    phase_ = Phase::kEnded;
    if (admitted) {
      closed_ = Internal(std::string("control stream handler failed: ") + e.what());
    }
    CloseAfterFlush(grpc::Status(grpc::StatusCode::INTERNAL, e.what()));
  }
}

void ControlSession::ReadHello(bool ok) {
  wire::WorkerMessage first;
  if (!ok || !Parse(&first)) {
    return RefuseUnauthenticated("no-hello",
                                 "the stream ended (or was cut off for its size or deadline) "
                                 "before its Hello");
  }
  if (first.kind_case() != wire::WorkerMessage::kHello) {
    return RefuseUnauthenticated("no-hello", "the first message of a control stream must be Hello");
  }
  worker_nonce_ = first.hello().worker_nonce();
  if (worker_nonce_.size() != kNonceBytes) {
    return RefuseUnauthenticated(
        "bad-nonce", "the Hello carries a nonce of " + std::to_string(worker_nonce_.size()) +
                         " bytes, not " + std::to_string(kNonceBytes) + " (an older kolo?)");
  }
  StatusOr<WorkerMessage> converted = FromWire(first);
  if (!converted.ok()) return RefuseUnauthenticated("bad-hello", converted.status().message());
  hello_ = converted->hello;
  if (first.hello().relay()) relay_ = std::make_shared<RelayIntake>(sessions_, this);
  StatusOr<std::string> nonce = RandomBytes(kNonceBytes);
  if (!nonce.ok()) return RefuseUnauthenticated("rng", nonce.status().message());
  controller_nonce_ = std::move(nonce).value();
  wire::ControllerMessage challenge;
  challenge.mutable_challenge()->set_controller_nonce(controller_nonce_);
  challenge.mutable_challenge()->set_controller_proof(
      ControlProof(sessions_->config().security.credentials, ControlRole::kController, hello_,
                   worker_nonce_, controller_nonce_));
  Enqueue(sessions_->Encode(challenge));  // a broken stream shows up as a failed read next
  phase_ = Phase::kProof;
  StartRead(&in_);
}

void ControlSession::ReadProof(bool ok) {
  const std::string who = "rank " + std::to_string(hello_.rank);
  wire::WorkerMessage second;
  if (!ok || !Parse(&second)) {
    return RefuseUnauthenticated(
        "no-proof", who +
                        ": the stream ended before answering the challenge (a worker that "
                        "could not verify this controller, or past the deadline)");
  }
  if (second.kind_case() != wire::WorkerMessage::kProof) {
    return RefuseUnauthenticated(
        "no-proof", who + ": the second message of a control stream must answer the challenge");
  }
  const std::string expected =
      ControlProof(sessions_->config().security.credentials, ControlRole::kWorker, hello_,
                   worker_nonce_, controller_nonce_);
  if (!MacEquals(second.proof().proof(), expected)) {
    return RefuseUnauthenticated(
        "bad-proof", who +
                         " could not prove that it holds this job's secret (a different "
                         "KOLO_SECRET or KOLO_JOB_ID, or a replayed answer)");
  }
  sessions_->ClearDeadline(this);
  Admit();
}

void ControlSession::Admit() {
  if (relay()) {
    // No rank of its own: its members are admitted one by one as their Hellos arrive on it.
    if (hello_.protocol != kProtocolVersion) {
      return Refuse(FailedPrecondition("the control relay of rank " + std::to_string(hello_.rank) +
                                       " speaks protocol " + std::to_string(hello_.protocol) +
                                       ", the controller " + std::to_string(kProtocolVersion)));
    }
    relay_->set_name("hosted by rank " + std::to_string(hello_.rank) + " at " + Peer());
    {
      MutexLock lock(&mu_);
      admitted_ = true;
    }
    sessions_->config().logger->info("control relay {} admitted", relay_->name());
    phase_ = Phase::kAdmitted;
    return StartRead(&in_);
  }
  // Registered before OnHello, so that what the handler sends from inside OnHello (the
  // Welcome, when this is the last rank to say hello) is queued rather than dropped.
  const Status registered = sessions_->Register(this);
  if (!registered.ok()) return Refuse(registered);
  const Status admitted = sessions_->config().handler->OnHello(hello_);
  if (!admitted.ok()) {
    sessions_->Unregister(this);
    return Refuse(admitted);
  }
  {
    MutexLock lock(&mu_);
    admitted_ = true;
  }
  sessions_->config().logger->debug("control stream of rank {} admitted ({})", hello_.rank, Peer());
  phase_ = Phase::kAdmitted;
  StartRead(&in_);
}

void ControlSession::ReadMessage(bool ok) {
  const auto who = [this] {
    return (relay() ? "the stream of the control relay in rank " : "control stream of rank ") +
           std::to_string(hello_.rank);
  };
  if (!ok) {
    if (saw_shutdown_) return EndAdmitted(Status::Ok());
    if (sessions_->stopping()) {
      return EndAdmitted(Unavailable(who() + " was cancelled: the controller is stopping"));
    }
    return EndAdmitted(
        Unavailable(who() + " closed without shutdown (process died or network " + "lost)"));
  }
  // Scratch reused by every message the queue's thread reads (it serves all streams), keeping
  // its storage; the handler copies what it keeps.
  thread_local wire::WorkerMessage parsed;
  thread_local WorkerMessage message;
  if (relay()) {
    const Status taken = Parse(&parsed) && parsed.kind_case() == wire::WorkerMessage::kRelayed
                             ? relay_->Take(parsed.relayed())
                             : InvalidArgument("not a RelayBatch");
    if (!taken.ok()) {
      return EndAdmitted(Unavailable("control relay " + relay_->name() +
                                     " sent a malformed message: " + taken.message()));
    }
    return StartRead(&in_);
  }
  const Status converted =
      Parse(&parsed) ? FromWire(parsed, &message) : InvalidArgument("not a WorkerMessage");
  if (!converted.ok()) {
    return EndAdmitted(Unavailable(who() + " sent a malformed message: " + converted.message()));
  }
  saw_shutdown_ = saw_shutdown_ || message.kind == WorkerMessage::Kind::kShutdown;
  sessions_->config().handler->OnMessage(hello_.rank, message);
  StartRead(&in_);
}

void ControlSession::RefuseUnauthenticated(const char* key, const std::string& reason) {
  phase_ = Phase::kEnded;
  sessions_->refusals().Refused(key, Peer(), reason);
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = reason;
  Enqueue(sessions_->Encode(abort));  // best effort: the status carries the reason as well
  CloseAfterFlush(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, reason));
}

void ControlSession::Refuse(const Status& why) {
  phase_ = Phase::kEnded;
  const Logger& logger = sessions_->config().logger;
  if (why.code() == StatusCode::kUnavailable) {
    // Not now rather than not ever (docs/PROTOCOL.md, "Joining"): no Abort, and a status that
    // the worker retries on until its start timeout.
    logger->info("turned away rank {} for now: {}", hello_.rank, why.message());
    return CloseAfterFlush(grpc::Status(
        grpc::StatusCode::UNAVAILABLE, "the controller turned rank " + std::to_string(hello_.rank) +
                                           " away for now: " + why.message()));
  }
  logger->warn("refused a control stream: {}", why.message());
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = why.message();
  Enqueue(sessions_->Encode(abort));  // best effort: the status carries the reason as well
  CloseAfterFlush(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, why.message()));
}

void ControlSession::EndAdmitted(const Status& closed) {
  phase_ = Phase::kEnded;
  closed_ = closed;
  CloseAfterFlush(closed.ok() ? grpc::Status::OK
                              : grpc::Status(grpc::StatusCode::UNAVAILABLE, closed.message()));
}

void ControlSession::CloseAfterFlush(grpc::Status status) {
  // The deadline goes in before the stream can finish, so that Complete's ClearDeadline is
  // the last word and the reaper never holds a finished session.
  sessions_->SetDeadline(this, sessions_->FlushDeadline(), /*flushing=*/true);
  bool finish = false;
  {
    MutexLock lock(&mu_);
    closing_ = true;
    final_status_ = std::move(status);
    finish = FinishNowLocked();
  }
  if (finish) Complete();
}

bool ControlSession::FinishNowLocked() {
  if (!closing_ || writing_ || finished_) return false;
  finished_ = true;
  queue_.clear();
  return true;
}

void ControlSession::Complete() {
  sessions_->ClearDeadline(this);
  bool admitted = false;
  grpc::Status status;
  {
    MutexLock lock(&mu_);
    admitted = admitted_;
    status = final_status_;
  }
  if (admitted && relay()) {
    relay_->LoseAll(closed_);
  } else if (admitted) {
    sessions_->Unregister(this);
    sessions_->config().handler->OnStreamClosed(hello_.rank, closed_);
  }
  Finish(std::move(status));
}

const char* ControlSession::Enqueue(const Encoded& message) {
  {
    MutexLock lock(&mu_);
    if (finished_ || broken_) return "its control stream is closing";
    if (writing_) {
      queue_.push_back(message);
      return nullptr;
    }
    writing_ = true;
    writing_message_ = message;
  }
  StartWrite(writing_message_.get());
  return nullptr;
}

size_t ControlSession::queued() const {
  MutexLock lock(&mu_);
  return queue_.size();
}

void ControlSession::OnWriteDone(bool ok) {
  bool next = false;
  bool finish = false;
  {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      if (admitted_ && !broken_) {
        sessions_->config().logger->warn(
            "control stream of rank {} broke; dropped {} queued "
            "messages",
            hello_.rank, queue_.size() + 1);
      }
      broken_ = true;
      queue_.clear();
    } else if (!queue_.empty()) {
      writing_ = true;
      writing_message_ = std::move(queue_.front());
      queue_.pop_front();
      next = true;
    }
    finish = FinishNowLocked();
  }
  if (next) StartWrite(writing_message_.get());
  if (finish) Complete();
}

void ControlSession::OnDone() {
  sessions_->SessionEnded();  // touches nothing of this session
  delete this;
}

}  // namespace kolo::transport
