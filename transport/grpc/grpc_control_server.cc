#include "transport/grpc/grpc_control_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>

#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "proto/kolo.grpc.pb.h"
#include "transport/auth/refusal_log.h"
#include "transport/deadline.h"
#include "transport/grpc/control_auth.h"
#include "transport/grpc/front_door.h"
#include "transport/grpc/grpc_credentials.h"
#include "transport/grpc/grpc_keepalive.h"
#include "transport/grpc/listen_address.h"
#include "transport/grpc/wire_convert.h"

namespace kolo::transport {
namespace {

using SessionStream = grpc::ServerReaderWriter<wire::ControllerMessage, wire::WorkerMessage>;
// A message encoded once and shared by the queues of every stream it goes to.
using Encoded = std::shared_ptr<const wire::ControllerMessage>;

// One worker's stream, shared by its handler thread, its writer thread and Send/Stop callers.
struct StreamState {
  StreamState(int rank, grpc::ServerContext* context) : rank(rank), context(context) {}
  const int rank;
  // Valid while the stream is registered: its handler thread unregisters before returning.
  grpc::ServerContext* const context;
  // Below: guarded by Impl::mu_, which clang's analysis cannot name from here (the streams_
  // map that owns these is KOLO_GUARDED_BY(mu_) and every access goes through it or through
  // the stream's own threads while they hold mu_).
  std::deque<Encoded> queue;
  bool writing = false;      // the writer is inside Write()
  bool reader_done = false;  // the worker sends nothing more; flush and end
  bool writer_done = false;  // the writer thread has exited; later messages are dropped
  CondVar wake_writer;       // with Impl::mu_
  CondVar writer_exited;     // with Impl::mu_
};

}  // namespace

class GrpcControlServer::Impl final : public wire::Controller::Service {
 public:
  Impl(ControllerHandler* handler, double timeout_seconds, Logger logger, ControlSecurity security)
      : handler_(handler),
        timeout_seconds_(timeout_seconds),
        logger_(std::move(logger)),
        security_(std::move(security)),
        refusals_(logger_, "control stream") {}

  Status Start(const std::string& address, int job_size);
  int port() const { return port_; }
  const std::string& generation() const { return generation_; }
  void Send(int rank, const ControllerMessage& message);
  void SendToEach(int size, int skip, const ControllerMessage& message);
  void Stop(SteadyTime deadline);
  grpc::Status Session(grpc::ServerContext* context, SessionStream* stream) override;

 private:
  grpc::Status RunSession(grpc::ServerContext* context, SessionStream* stream);
  // The peer's address: gRPC names a connection the front door handed it "fd:N".
  std::string Peer(const grpc::ServerContext& context) const;
  // Runs the admission handshake; on success returns the authenticated Hello, else the
  // refusal to return (already logged and sent).
  StatusOr<Hello> Authenticate(grpc::ServerContext* context, SessionStream* stream,
                               grpc::Status* refusal);
  void ReaperLoop();
  StatusOr<std::shared_ptr<StreamState>> Register(int rank, grpc::ServerContext* context);
  void Unregister(const std::shared_ptr<StreamState>& state);
  Status ReadLoop(int rank, SessionStream* stream);
  void WriteLoop(StreamState& state, SessionStream* stream);
  void FinishWriter(StreamState& state, std::thread& writer);
  // The wire form of `message` (a Welcome gets this server's generation).
  Encoded Encode(const ControllerMessage& message) const;
  // Queues `encoded` for `rank`'s stream; the reason it was dropped, or nullptr.
  const char* EnqueueLocked(int rank, const Encoded& encoded) KOLO_REQUIRES(mu_);
  void LogDropped(const ControllerMessage& message, int rank, const char* because) const;
  // Refuses an authenticated stream: an Unavailable `why` for now (UNAVAILABLE, retried by
  // the worker), any other for good (an Abort with the reason).
  grpc::Status Refuse(SessionStream* stream, int rank, const Status& why);
  grpc::Status RefuseUnauthenticated(grpc::ServerContext* context, SessionStream* stream,
                                     const char* key, const std::string& reason);

  // Constant after Start.
  ControllerHandler* const handler_;
  const double timeout_seconds_;
  const Logger logger_;
  const ControlSecurity security_;
  std::string generation_;  // random per start; the Welcome carries it
  std::unique_ptr<grpc::Server> server_;
  // The listener when the control plane is plaintext (front_door.h); null with TLS, where
  // gRPC's own listener accepts. Its thread is stopped before server_ shuts down.
  std::unique_ptr<FrontDoor> front_door_;
  int port_ = 0;
  std::thread reaper_;   // joined by Stop
  RefusalLog refusals_;  // thread-safe

  // Streams still in the admission handshake, with their deadlines; the reaper cancels late
  // ones. An entry is removed by its own stream thread before that thread returns.
  Mutex handshake_mu_;
  std::map<grpc::ServerContext*, SteadyTime> handshaking_ KOLO_GUARDED_BY(handshake_mu_);
  bool reaper_stop_ KOLO_GUARDED_BY(handshake_mu_) = false;
  CondVar reaper_wake_;  // with handshake_mu_

  Mutex stop_mu_;  // serialises Stop calls
  bool stopped_ KOLO_GUARDED_BY(stop_mu_) = false;

  mutable Mutex mu_;
  std::map<int, std::shared_ptr<StreamState>> streams_ KOLO_GUARDED_BY(mu_);  // by rank
  bool stopping_ KOLO_GUARDED_BY(mu_) = false;
  SteadyTime stop_deadline_ KOLO_GUARDED_BY(mu_);  // set with stopping_
  CondVar drained_;                                // with mu_: a queue emptied or a stream ended
};

Status GrpcControlServer::Impl::Start(const std::string& address, int job_size) {
  KOLO_ASSIGN_OR_RETURN(generation_, RandomBytes(16));
  StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(security_);
  if (!credentials.ok()) return credentials.status();
  const bool tls = !security_.tls_cert.empty() || !security_.tls_key.empty();
  grpc::ServerBuilder builder;
  if (tls) {
    KOLO_RETURN_IF_ERROR(ProbeListenAddress(address));
    builder.AddListeningPort(address, *credentials, &port_);
  } else {
    KOLO_ASSIGN_OR_RETURN(front_door_,
                          FrontDoor::Listen(address, timeout_seconds_, job_size, logger_));
    port_ = front_door_->port();
  }
  builder.RegisterService(this);
  ApplyServerArguments(timeout_seconds_, &builder);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return Unavailable("the controller cannot listen on " + address +
                       " (address in use, or not an address of this host?)");
  }
  if (front_door_ != nullptr) {
    front_door_->Start([this](int fd) { grpc::AddInsecureChannelFromFd(server_.get(), fd); });
  }
  reaper_ = std::thread([this] { ReaperLoop(); });
  logger_->info("controller listening on {} (port {}{})", address, port_, tls ? ", TLS" : "");
  return Status::Ok();
}

std::string GrpcControlServer::Impl::Peer(const grpc::ServerContext& context) const {
  const std::string peer = context.peer();
  return front_door_ != nullptr ? front_door_->PeerName(peer) : peer;
}

grpc::Status GrpcControlServer::Impl::Session(grpc::ServerContext* context, SessionStream* stream) {
  try {
    return RunSession(context, stream);
  } catch (const std::exception& e) {  // third-party code (gRPC, protobuf) at a thread boundary
    logger_->error("control stream handler failed: {}", e.what());
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  }
}

grpc::Status GrpcControlServer::Impl::RunSession(grpc::ServerContext* context,
                                                 SessionStream* stream) {
  grpc::Status refusal;
  {
    MutexLock lock(&handshake_mu_);
    handshaking_[context] = AddSeconds(std::chrono::steady_clock::now(), timeout_seconds_);
    reaper_wake_.NotifyAll();
  }
  StatusOr<Hello> hello = Authenticate(context, stream, &refusal);
  {
    MutexLock lock(&handshake_mu_);
    handshaking_.erase(context);
  }
  if (!hello.ok()) return refusal;
  const int rank = hello->rank;
  // Registered before OnHello, so that what the handler sends from inside OnHello (the
  // Welcome, when this is the last rank to say hello) is queued rather than dropped.
  StatusOr<std::shared_ptr<StreamState>> state = Register(rank, context);
  if (!state.ok()) return Refuse(stream, rank, state.status());
  Status admitted = handler_->OnHello(*hello);
  if (!admitted.ok()) {
    Unregister(*state);
    return Refuse(stream, rank, admitted);
  }
  logger_->debug("control stream of rank {} admitted ({})", rank, Peer(*context));
  std::thread writer([this, s = *state, stream] { WriteLoop(*s, stream); });
  Status closed = ReadLoop(rank, stream);
  FinishWriter(**state, writer);
  Unregister(*state);
  handler_->OnStreamClosed(rank, closed);
  if (closed.ok()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, closed.message());
}

StatusOr<Hello> GrpcControlServer::Impl::Authenticate(grpc::ServerContext* context,
                                                      SessionStream* stream,
                                                      grpc::Status* refusal) {
  const auto refuse = [&](const char* key, const std::string& reason) {
    *refusal = RefuseUnauthenticated(context, stream, key, reason);
    return Unavailable(reason);
  };
  wire::WorkerMessage first;
  if (!stream->Read(&first)) {
    return refuse("no-hello",
                  "the stream ended (or was cut off for its size or deadline) "
                  "before its Hello");
  }
  if (first.kind_case() != wire::WorkerMessage::kHello) {
    return refuse("no-hello", "the first message of a control stream must be Hello");
  }
  const std::string worker_nonce = first.hello().worker_nonce();
  if (worker_nonce.size() != kNonceBytes) {
    return refuse("bad-nonce", "the Hello carries a nonce of " +
                                   std::to_string(worker_nonce.size()) + " bytes, not " +
                                   std::to_string(kNonceBytes) + " (an older kolo?)");
  }
  StatusOr<WorkerMessage> converted = FromWire(first);
  if (!converted.ok()) return refuse("bad-hello", converted.status().message());
  const Hello hello = converted->hello;
  StatusOr<std::string> controller_nonce = RandomBytes(kNonceBytes);
  if (!controller_nonce.ok()) return refuse("rng", controller_nonce.status().message());
  wire::ControllerMessage challenge;
  challenge.mutable_challenge()->set_controller_nonce(*controller_nonce);
  challenge.mutable_challenge()->set_controller_proof(ControlProof(
      security_.credentials, ControlRole::kController, hello, worker_nonce, *controller_nonce));
  if (!stream->Write(challenge)) {
    return refuse("no-proof", "the stream broke before its challenge was sent");
  }
  wire::WorkerMessage second;
  if (!stream->Read(&second)) {
    return refuse("no-proof", "rank " + std::to_string(hello.rank) +
                                  ": the stream ended before answering the challenge (a worker "
                                  "that could not verify this controller, or past the deadline)");
  }
  if (second.kind_case() != wire::WorkerMessage::kProof) {
    return refuse("no-proof", "rank " + std::to_string(hello.rank) +
                                  ": the second message of a control stream must answer the "
                                  "challenge");
  }
  const std::string expected = ControlProof(security_.credentials, ControlRole::kWorker, hello,
                                            worker_nonce, *controller_nonce);
  if (!MacEquals(second.proof().proof(), expected)) {
    return refuse("bad-proof", "rank " + std::to_string(hello.rank) +
                                   " could not prove that it holds this job's secret (a "
                                   "different KOLO_SECRET or KOLO_JOB_ID, or a replayed answer)");
  }
  return hello;
}

grpc::Status GrpcControlServer::Impl::RefuseUnauthenticated(grpc::ServerContext* context,
                                                            SessionStream* stream, const char* key,
                                                            const std::string& reason) {
  refusals_.Refused(key, Peer(*context), reason);
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = reason;
  stream->Write(ToWire(abort));  // best effort: the status carries the reason as well
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, reason);
}

void GrpcControlServer::Impl::ReaperLoop() {
  MutexLock lock(&handshake_mu_);
  while (!reaper_stop_) {
    SteadyTime next = SteadyTime::max();
    const SteadyTime now = std::chrono::steady_clock::now();
    for (auto& [context, deadline] : handshaking_) {
      if (deadline <= now) {
        context->TryCancel();  // its Read returns false; the stream thread refuses it
        deadline = SteadyTime::max();
      }
      next = std::min(next, deadline);
    }
    if (next == SteadyTime::max()) {
      reaper_wake_.Wait(&handshake_mu_);  // woken by a new handshake or by Stop
    } else {
      reaper_wake_.WaitUntil(&handshake_mu_, next);
    }
  }
}

grpc::Status GrpcControlServer::Impl::Refuse(SessionStream* stream, int rank, const Status& why) {
  if (why.code() == StatusCode::kUnavailable) {
    // Not now rather than not ever (docs/PROTOCOL.md, "Joining"): no Abort, and a status that
    // the worker retries on until its start timeout.
    logger_->info("turned away rank {} for now: {}", rank, why.message());
    return grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        "the controller turned rank " + std::to_string(rank) + " away for now: " + why.message());
  }
  logger_->warn("refused a control stream: {}", why.message());
  ControllerMessage abort;
  abort.kind = ControllerMessage::Kind::kAbort;
  abort.reason = why.message();
  stream->Write(ToWire(abort));  // best effort: the status carries the reason as well
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, why.message());
}

StatusOr<std::shared_ptr<StreamState>> GrpcControlServer::Impl::Register(
    int rank, grpc::ServerContext* context) {
  MutexLock lock(&mu_);
  if (stopping_) return Unavailable("the controller is shutting down");
  if (streams_.count(rank) != 0) {
    return FailedPrecondition("rank " + std::to_string(rank) + " already has a control stream");
  }
  auto state = std::make_shared<StreamState>(rank, context);
  streams_[rank] = state;
  return state;
}

void GrpcControlServer::Impl::Unregister(const std::shared_ptr<StreamState>& state) {
  MutexLock lock(&mu_);
  auto it = streams_.find(state->rank);
  if (it != streams_.end() && it->second == state) streams_.erase(it);
  drained_.NotifyAll();
}

Status GrpcControlServer::Impl::ReadLoop(int rank, SessionStream* stream) {
  const std::string who = "control stream of rank " + std::to_string(rank);
  bool saw_shutdown = false;
  wire::WorkerMessage in;
  while (stream->Read(&in)) {
    StatusOr<WorkerMessage> message = FromWire(in);
    if (!message.ok()) {
      return Unavailable(who + " sent a malformed message: " + message.status().message());
    }
    saw_shutdown = saw_shutdown || message->kind == WorkerMessage::Kind::kShutdown;
    handler_->OnMessage(rank, *message);
  }
  if (saw_shutdown) return Status::Ok();
  MutexLock lock(&mu_);
  if (stopping_) return Unavailable(who + " was cancelled: the controller is stopping");
  return Unavailable(who + " closed without shutdown (process died or network lost)");
}

void GrpcControlServer::Impl::WriteLoop(StreamState& state, SessionStream* stream) {
  MutexLock lock(&mu_);
  for (;;) {
    state.wake_writer.Wait(&mu_, [&]() KOLO_REQUIRES(mu_) {
      return !state.queue.empty() || state.reader_done || stopping_;
    });
    if (state.queue.empty()) break;
    Encoded next = std::move(state.queue.front());
    state.queue.pop_front();
    state.writing = true;
    lock.Unlock();
    const bool written = stream->Write(*next);
    lock.Lock();
    state.writing = false;
    if (!written) {
      logger_->warn("control stream of rank {} broke; dropped {} queued messages", state.rank,
                    state.queue.size() + 1);
      break;
    }
    if (state.queue.empty()) drained_.NotifyAll();
  }
  state.queue.clear();
  state.writer_done = true;
  state.writer_exited.NotifyAll();
  drained_.NotifyAll();
}

void GrpcControlServer::Impl::FinishWriter(StreamState& state, std::thread& writer) {
  {
    MutexLock lock(&mu_);
    state.reader_done = true;
    state.wake_writer.NotifyAll();
    SteadyTime flush_deadline = AddSeconds(std::chrono::steady_clock::now(), timeout_seconds_);
    if (stopping_) flush_deadline = std::min(flush_deadline, stop_deadline_);
    if (!state.writer_exited.WaitUntil(&mu_, flush_deadline, [&] { return state.writer_done; })) {
      logger_->warn("control stream of rank {}: cancelled with {} messages not yet written",
                    state.rank, state.queue.size());
      state.context->TryCancel();  // unblocks the writer's Write
    }
  }
  writer.join();
}

Encoded GrpcControlServer::Impl::Encode(const ControllerMessage& message) const {
  auto out = std::make_shared<wire::ControllerMessage>(ToWire(message));
  if (message.kind == ControllerMessage::Kind::kWelcome) {
    out->mutable_welcome()->set_generation(generation_);
  }
  return out;
}

const char* GrpcControlServer::Impl::EnqueueLocked(int rank, const Encoded& encoded) {
  if (stopping_) return "the controller is stopping";
  auto it = streams_.find(rank);
  if (it == streams_.end()) return "it has no control stream";
  if (it->second->writer_done) return "its control stream is closing";
  it->second->queue.push_back(encoded);
  it->second->wake_writer.NotifyOne();
  return nullptr;
}

void GrpcControlServer::Impl::LogDropped(const ControllerMessage& message, int rank,
                                         const char* because) const {
  // A Pong only answers a clock sample for the timeline, which a stopping job no longer needs:
  // dropping one is routine (clean shutdowns right after init dropped them and warned).
  const spdlog::level::level_enum level =
      message.kind == ControllerMessage::Kind::kPong ? spdlog::level::debug : spdlog::level::warn;
  logger_->log(level, "dropped a {} message for rank {}: {}", KindName(message.kind), rank,
               because);
}

void GrpcControlServer::Impl::Send(int rank, const ControllerMessage& message) {
  const Encoded encoded = Encode(message);  // outside the lock: the writers keep writing
  const char* dropped_because = nullptr;
  {
    MutexLock lock(&mu_);
    dropped_because = EnqueueLocked(rank, encoded);
  }
  if (dropped_because != nullptr) LogDropped(message, rank, dropped_because);
}

void GrpcControlServer::Impl::SendToEach(int size, int skip, const ControllerMessage& message) {
  const Encoded encoded = Encode(message);  // once for every copy
  std::vector<std::pair<int, const char*>> dropped;
  {
    MutexLock lock(&mu_);
    for (int rank = 0; rank < size; ++rank) {
      if (rank == skip) continue;
      if (const char* because = EnqueueLocked(rank, encoded)) dropped.emplace_back(rank, because);
    }
  }
  for (const auto& [rank, because] : dropped) LogDropped(message, rank, because);
}

void GrpcControlServer::Impl::Stop(SteadyTime deadline) {
  MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    stop_deadline_ = deadline;
    for (const auto& [rank, state] : streams_) state->wake_writer.NotifyAll();
    // A returned Write only means gRPC took the message, not that the worker read it: wait
    // for the workers to end their streams (they do once they have read Shutdown), and cancel
    // only what is left at the deadline.
    drained_.WaitUntil(&mu_, deadline, [&]() KOLO_REQUIRES(mu_) { return streams_.empty(); });
    for (const auto& [rank, state] : streams_) state->context->TryCancel();
  }
  if (front_door_ != nullptr) front_door_->Stop();  // no connection is handed over after this
  {
    MutexLock lock(&handshake_mu_);
    for (const auto& [context, unused] : handshaking_) context->TryCancel();
    reaper_stop_ = true;
    reaper_wake_.NotifyAll();
  }
  server_->Shutdown(
      ToSystemClock(deadline));  // cancels streams that never said hello, at the deadline
  server_->Wait();
  if (reaper_.joinable()) reaper_.join();
  stopped_ = true;
  logger_->info("controller stopped");
}

GrpcControlServer::GrpcControlServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcControlServer::~GrpcControlServer() {
  Stop(std::chrono::steady_clock::now());
}

StatusOr<std::unique_ptr<GrpcControlServer>> GrpcControlServer::Start(
    const std::string& listen_address, ControllerHandler* handler, double timeout_seconds,
    Logger logger, const ControlSecurity& security, int job_size) {
  if (!logger) logger = MakeLogger(0, "controller-rpc", spdlog::level::warn);
  auto impl = std::make_unique<Impl>(handler, timeout_seconds, std::move(logger), security);
  KOLO_RETURN_IF_ERROR(impl->Start(listen_address, job_size));
  return std::unique_ptr<GrpcControlServer>(new GrpcControlServer(std::move(impl)));
}

int GrpcControlServer::port() const {
  return impl_->port();
}

const std::string& GrpcControlServer::generation() const {
  return impl_->generation();
}

void GrpcControlServer::Send(int rank, const ControllerMessage& message) {
  impl_->Send(rank, message);
}

void GrpcControlServer::SendToEach(int size, int skip, const ControllerMessage& message) {
  impl_->SendToEach(size, skip, message);
}

void GrpcControlServer::Stop(std::chrono::steady_clock::time_point deadline) {
  impl_->Stop(deadline);
}

}  // namespace kolo::transport
