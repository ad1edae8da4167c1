#include "transport/grpc/elastic_rendezvous.h"

#include <grpcpp/grpcpp.h>

#include "proto/kolo.grpc.pb.h"
#include "transport/grpc/elastic_envelope.h"
#include "transport/grpc/grpc_status.h"

namespace kolo::transport {
namespace {

// The driver refuses a replayed call among the last this many it accepted.
constexpr size_t kRememberedNonces = 1 << 16;
// Messages here are a few hundred bytes; anything near this is not a rendezvous message.
constexpr int kMaxElasticMessageBytes = 64 * 1024;

wire::ElasticEnvelope ToEnvelope(const SealedMessage& sealed) {
  wire::ElasticEnvelope envelope;
  envelope.set_body(sealed.body);
  envelope.set_nonce(sealed.nonce);
  envelope.set_proof(sealed.proof);
  return envelope;
}

SealedMessage FromEnvelope(const wire::ElasticEnvelope& envelope) {
  return {envelope.body(), envelope.nonce(), envelope.proof()};
}

wire::ElasticJoinReply::Outcome ToWire(ElasticOutcome outcome) {
  switch (outcome) {
    case ElasticOutcome::kAssigned:
      return wire::ElasticJoinReply::ASSIGNED;
    case ElasticOutcome::kRefused:
      return wire::ElasticJoinReply::REFUSED;
    case ElasticOutcome::kPending:
      break;
  }
  return wire::ElasticJoinReply::PENDING;
}

ElasticOutcome FromWire(wire::ElasticJoinReply::Outcome outcome) {
  switch (outcome) {
    case wire::ElasticJoinReply::ASSIGNED:
      return ElasticOutcome::kAssigned;
    case wire::ElasticJoinReply::REFUSED:
      return ElasticOutcome::kRefused;
    default:
      return ElasticOutcome::kPending;
  }
}

class RendezvousService final : public wire::ElasticRendezvous::Service {
 public:
  RendezvousService(JobCredentials credentials, ElasticMembershipService* membership)
      : credentials_(std::move(credentials)), membership_(membership) {}

  grpc::Status Join(grpc::ServerContext* /*context*/, const wire::ElasticEnvelope* call,
                    wire::ElasticEnvelope* answer) override {
    wire::ElasticJoinRequest request;
    grpc::Status opened = Open(ElasticCall::kJoin, *call, &request);
    if (!opened.ok()) return opened;
    ElasticJoinRequest join;
    join.worker_id = request.worker_id();
    join.last_generation = request.last_generation();
    join.controller_port = request.controller_port();
    const ElasticAssignment assignment = membership_->Join(
        join, std::chrono::steady_clock::now() + std::chrono::milliseconds(kJoinAnswerWait));
    wire::ElasticJoinReply reply;
    reply.set_outcome(ToWire(assignment.outcome));
    reply.set_message(assignment.message);
    reply.set_generation(assignment.generation);
    reply.set_rank(assignment.rank);
    reply.set_size(assignment.size);
    reply.set_controller_address(assignment.controller_address);
    reply.set_job_id(assignment.job_id);
    reply.set_hostname(assignment.hostname);
    reply.set_hosts_timestamp(assignment.hosts_timestamp);
    *answer = ToEnvelope(Seal(credentials_, ElasticCall::kJoin, ElasticDirection::kAnswer,
                              reply.SerializeAsString(), call->nonce()));
    return grpc::Status::OK;
  }

  grpc::Status Poll(grpc::ServerContext* /*context*/, const wire::ElasticEnvelope* call,
                    wire::ElasticEnvelope* answer) override {
    wire::ElasticPollRequest request;
    grpc::Status opened = Open(ElasticCall::kPoll, *call, &request);
    if (!opened.ok()) return opened;
    const ElasticHostChanges changes =
        membership_->Poll(request.worker_id(), request.since(), request.generation());
    wire::ElasticPollReply reply;
    reply.set_timestamp(changes.timestamp);
    reply.set_kinds(changes.kinds);
    reply.set_lost_member(changes.lost_member);
    reply.set_lost_rank(changes.lost_rank);
    *answer = ToEnvelope(Seal(credentials_, ElasticCall::kPoll, ElasticDirection::kAnswer,
                              reply.SerializeAsString(), call->nonce()));
    return grpc::Status::OK;
  }

 private:
  // Checks the seal and freshness of `call` and parses its body into `request`.
  grpc::Status Open(ElasticCall kind, const wire::ElasticEnvelope& call,
                    google::protobuf::Message* request) {
    Status sealed = CheckSeal(credentials_, kind, ElasticDirection::kCall, FromEnvelope(call));
    if (!sealed.ok()) return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, sealed.message());
    if (!nonces_.Fresh(call.nonce())) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "elastic rendezvous call replayed (its nonce was used before)");
    }
    if (!request->ParseFromString(call.body())) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "elastic rendezvous call whose body does not parse");
    }
    return grpc::Status::OK;
  }

  const JobCredentials credentials_;
  ElasticMembershipService* const membership_;
  NonceFilter nonces_{kRememberedNonces};
};

}  // namespace

class ElasticRendezvousServer::Impl {
 public:
  Impl(const JobCredentials& credentials, ElasticMembershipService* membership)
      : service_(credentials, membership) {}

  Status Start(const std::string& listen_address) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(listen_address, grpc::InsecureServerCredentials(), &port_);
    builder.SetMaxReceiveMessageSize(kMaxElasticMessageBytes);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      return Unavailable("the elastic rendezvous cannot listen on " + listen_address);
    }
    return Status::Ok();
  }

  void Stop() {
    if (!server_) return;
    // Calls in progress end within kJoinAnswerWait; later ones are refused at once.
    server_->Shutdown(std::chrono::system_clock::now() + 2 * kJoinAnswerWait);
    server_->Wait();
    server_.reset();
  }

  int port() const { return port_; }

 private:
  RendezvousService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

StatusOr<std::unique_ptr<ElasticRendezvousServer>> ElasticRendezvousServer::Start(
    const std::string& listen_address, const JobCredentials& credentials,
    ElasticMembershipService* service) {
  auto impl = std::make_unique<Impl>(credentials, service);
  KOLO_RETURN_IF_ERROR(impl->Start(listen_address));
  return std::unique_ptr<ElasticRendezvousServer>(new ElasticRendezvousServer(std::move(impl)));
}

ElasticRendezvousServer::ElasticRendezvousServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
ElasticRendezvousServer::~ElasticRendezvousServer() {
  Stop();
}
int ElasticRendezvousServer::port() const {
  return impl_->port();
}
void ElasticRendezvousServer::Stop() {
  impl_->Stop();
}

class ElasticRendezvousClient::Impl {
 public:
  Impl(const std::string& driver_address, const JobCredentials& credentials)
      : address_(driver_address), credentials_(credentials) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxElasticMessageBytes);
    stub_ = wire::ElasticRendezvous::NewStub(
        grpc::CreateCustomChannel(driver_address, grpc::InsecureChannelCredentials(), args));
  }

  // Seals `request`, makes the call `kind` until `deadline` (waiting for the driver to be
  // reachable), checks the answer's seal and parses it into `reply`.
  Status Call(ElasticCall kind, const google::protobuf::Message& request,
              std::chrono::steady_clock::time_point deadline, google::protobuf::Message* reply) {
    KOLO_ASSIGN_OR_RETURN(std::string nonce, RandomBytes(kNonceBytes));
    const SealedMessage call = Seal(credentials_, kind, ElasticDirection::kCall,
                                    request.SerializeAsString(), std::move(nonce));
    grpc::ClientContext context;
    // gRPC's deadlines are on the system clock.
    context.set_deadline(std::chrono::system_clock::now() +
                         (deadline - std::chrono::steady_clock::now()));
    context.set_wait_for_ready(true);
    wire::ElasticEnvelope answer;
    const wire::ElasticEnvelope envelope = ToEnvelope(call);
    grpc::Status status = kind == ElasticCall::kJoin ? stub_->Join(&context, envelope, &answer)
                                                     : stub_->Poll(&context, envelope, &answer);
    const std::string what = std::string("elastic rendezvous ") +
                             (kind == ElasticCall::kJoin ? "Join" : "Poll") + " at " + address_;
    if (!status.ok()) {
      if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        return Unavailable(what +
                           ": no answer from kolorun's elastic driver in time (is kolorun "
                           "still running?)");
      }
      return FromGrpcStatus(status, what);
    }
    SealedMessage sealed = FromEnvelope(answer);
    if (sealed.nonce != call.nonce) {
      return FailedPrecondition(what + ": the answer is not for this call");
    }
    KOLO_RETURN_IF_ERROR(
        CheckSeal(credentials_, kind, ElasticDirection::kAnswer, sealed).WithContext(what));
    if (!reply->ParseFromString(sealed.body)) {
      return Internal(what + ": the answer does not parse");
    }
    return Status::Ok();
  }

 private:
  const std::string address_;
  const JobCredentials credentials_;
  std::unique_ptr<wire::ElasticRendezvous::Stub> stub_;
};

ElasticRendezvousClient::ElasticRendezvousClient(const std::string& driver_address,
                                                 const JobCredentials& credentials)
    : impl_(std::make_unique<Impl>(driver_address, credentials)) {}
ElasticRendezvousClient::~ElasticRendezvousClient() = default;

StatusOr<ElasticAssignment> ElasticRendezvousClient::Join(
    const ElasticJoinRequest& request, std::chrono::steady_clock::time_point deadline) {
  wire::ElasticJoinRequest call;
  call.set_worker_id(request.worker_id);
  call.set_last_generation(request.last_generation);
  call.set_controller_port(request.controller_port);
  wire::ElasticJoinReply reply;
  KOLO_RETURN_IF_ERROR(impl_->Call(ElasticCall::kJoin, call, deadline, &reply));
  ElasticAssignment assignment;
  assignment.outcome = FromWire(reply.outcome());
  assignment.message = reply.message();
  assignment.generation = reply.generation();
  assignment.rank = reply.rank();
  assignment.size = reply.size();
  assignment.controller_address = reply.controller_address();
  assignment.job_id = reply.job_id();
  assignment.hostname = reply.hostname();
  assignment.hosts_timestamp = reply.hosts_timestamp();
  return assignment;
}

StatusOr<ElasticHostChanges> ElasticRendezvousClient::Poll(
    const std::string& worker_id, int64_t since, int64_t generation,
    std::chrono::steady_clock::time_point deadline) {
  wire::ElasticPollRequest call;
  call.set_worker_id(worker_id);
  call.set_since(since);
  call.set_generation(generation);
  wire::ElasticPollReply reply;
  KOLO_RETURN_IF_ERROR(impl_->Call(ElasticCall::kPoll, call, deadline, &reply));
  return ElasticHostChanges{reply.timestamp(), reply.kinds(), reply.lost_member(),
                            reply.lost_rank()};
}

}  // namespace kolo::transport
