#include "transport/grpc/grpc_control_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "core/mutex.h"
#include "proto/kolo.grpc.pb.h"
#include "transport/deadline.h"
#include "transport/grpc/control_sessions.h"
#include "transport/grpc/front_door.h"
#include "transport/grpc/grpc_credentials.h"
#include "transport/grpc/grpc_keepalive.h"
#include "transport/grpc/grpc_process.h"
#include "transport/grpc/listen_address.h"

namespace kolo::transport {

class GrpcControlServer::Impl final : public RawSessionService {
 public:
  Impl(ControllerHandler* handler, double timeout_seconds, Logger logger, ControlSecurity security)
      : handler_(handler),
        timeout_seconds_(timeout_seconds),
        logger_(std::move(logger)),
        security_(std::move(security)) {}

  Status Start(const std::string& address, int job_size);
  int port() const { return port_; }
  const std::string& generation() const { return generation_; }
  void Send(int rank, const ControllerMessage& message) { sessions_->Send(rank, message); }
  void SendToEach(int size, int skip, const ControllerMessage& message) {
    sessions_->SendToEach(size, skip, message);
  }
  void Forward(const std::vector<int>& ranks, const std::string& message) {
    sessions_->Forward(ranks, message);
  }
  void Stop(SteadyTime deadline);

 private:
  // The peer's address: gRPC names a connection the front door handed it "fd:N".
  std::string Peer(const std::string& grpc_peer) const {
    return front_door_ != nullptr ? front_door_->PeerName(grpc_peer) : grpc_peer;
  }

  // Constant after Start.
  ControllerHandler* const handler_;
  const double timeout_seconds_;
  const Logger logger_;
  const ControlSecurity security_;
  std::string generation_;  // random per start; the Welcome carries it
  // The streams; made before the server starts and destroyed after it has stopped.
  std::unique_ptr<ControlSessions> sessions_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;  // every stream's; sessions_ drives it
  // The listener when the control plane is plaintext (front_door.h); null with TLS, where
  // gRPC's own listener accepts. Its thread is stopped before server_ shuts down.
  std::unique_ptr<FrontDoor> front_door_;
  int port_ = 0;

  Mutex stop_mu_;  // serialises Stop calls
  bool stopped_ KOLO_GUARDED_BY(stop_mu_) = false;
};

Status GrpcControlServer::Impl::Start(const std::string& address, int job_size) {
  SetUpGrpcProcess();
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
  cq_ = builder.AddCompletionQueue();
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || (port_ == 0 && !IsUnixAbstractAddress(address))) {
    if (server_ != nullptr) server_->Shutdown();
    cq_->Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) {
    }
    return Unavailable("the controller cannot listen on " + address +
                       " (address in use, or not an address of this host?)");
  }
  ControlSessions::Config config;
  config.handler = handler_;
  config.timeout_seconds = timeout_seconds_;
  config.logger = logger_;
  config.security = security_;
  config.peer_name = [this](const std::string& peer) { return Peer(peer); };
  config.service = this;
  config.cq = cq_.get();
  sessions_ = std::make_unique<ControlSessions>(std::move(config), generation_);
  sessions_->Serve();
  if (front_door_ != nullptr) {
    front_door_->Start([this](int fd) { grpc::AddInsecureChannelFromFd(server_.get(), fd); });
  }
  logger_->info("controller listening on {} (port {}{})", address, port_, tls ? ", TLS" : "");
  return Status::Ok();
}

void GrpcControlServer::Impl::Stop(SteadyTime deadline) {
  MutexLock stop_lock(&stop_mu_);
  if (stopped_ || server_ == nullptr) return;
  // A returned write only means gRPC took the message, not that the worker read it: wait for
  // the workers to end their streams, and cancel only what is left at the deadline.
  sessions_->StopStreams(deadline);
  if (front_door_ != nullptr) front_door_->Stop();  // no connection is handed over after this
  sessions_->StopHandshakes();
  // Cancels streams that never said hello, at the deadline; returns once every stream is over
  // (the queue's thread runs their last reactions meanwhile), then the queue drains.
  server_->Shutdown(ToSystemClock(deadline));
  server_->Wait();
  // The streams' last events are still on the queue, and their reactions may start a finish
  // or a read (which then fails at once): the queue shuts down only after the last of them.
  // Cancelled streams end within milliseconds; the grace only keeps this wait bounded.
  if (!sessions_->ShutDownQueue(
          AddSeconds(std::max(deadline, std::chrono::steady_clock::now()), 5))) {
    logger_->error("controller stop: control streams still had events 5 s after the deadline");
  }
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

void GrpcControlServer::Forward(const std::vector<int>& ranks, const std::string& message) {
  impl_->Forward(ranks, message);
}

void GrpcControlServer::Stop(std::chrono::steady_clock::time_point deadline) {
  impl_->Stop(deadline);
}

}  // namespace kolo::transport
