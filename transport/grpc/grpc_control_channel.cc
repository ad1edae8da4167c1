#include "transport/grpc/grpc_control_channel.h"

#include <grpcpp/grpcpp.h>

#include <deque>
#include <thread>

#include "core/clock.h"
#include "core/mutex.h"
#include "proto/kolo.grpc.pb.h"
#include "transport/deadline.h"
#include "transport/grpc/grpc_credentials.h"
#include "transport/grpc/grpc_keepalive.h"
#include "transport/grpc/grpc_process.h"
#include "transport/grpc/grpc_status.h"
#include "transport/grpc/response_names.h"
#include "transport/grpc/wire_convert.h"

namespace kolo::transport {
namespace {

using SessionStream = grpc::ClientReaderWriter<wire::WorkerMessage, wire::ControllerMessage>;

const char* ChannelStateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "idle";
    case GRPC_CHANNEL_CONNECTING:
      return "connecting";
    case GRPC_CHANNEL_READY:
      return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "failing to connect";
    case GRPC_CHANNEL_SHUTDOWN:
      return "shut down";
  }
  return "unknown";
}

// The pauses between attempts to join a controller that could not take this Hello yet.
constexpr std::chrono::milliseconds kFirstRetryPause{10};
constexpr std::chrono::milliseconds kMaxRetryPause{250};
// How long WaitForController lets the channel try before it looks at the channel's state.
constexpr std::chrono::milliseconds kConnectSlice{500};

double SecondsSince(SteadyTime start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Whether a stream that ended with `status` before the controller sent anything but its
// Challenge may be tried again: the controller was stopping (it refuses with UNAVAILABLE,
// its gRPC server answers GOAWAY) or cancelled the stream while shutting down. Every real
// refusal arrives as an Abort message, or ends the stream with another code.
bool MayRetry(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::CANCELLED;
}

}  // namespace

class GrpcControlChannel::Impl {
 public:
  Impl(const std::string& address, double timeout_seconds, Logger logger,
       const ControlSecurity& security,
       StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials)
      : settings_{address,
                  timeout_seconds,
                  std::move(logger),
                  security,
                  credentials.status(),
                  credentials.ok() ? *credentials : grpc::InsecureChannelCredentials()} {
    NewGrpcChannel();
  }
  std::string generation() {
    MutexLock lock(&mu_);
    return generation_;
  }

  StatusOr<std::vector<PeerInfo>> Connect(const Hello& hello, SteadyTime deadline,
                                          std::function<void()> wake);
  Status Send(const WorkerMessage& message);
  void SetFatalHandler(std::function<void(const Status&)> on_fatal) {
    on_fatal_ = std::move(on_fatal);
  }
  StatusOr<std::optional<ControllerMessage>> TryReceive();
  void Close(SteadyTime deadline);

 private:
  void ReaderLoop();
  // Puts the names and element counts back into the responses of `in` that came by id, and
  // learns those of the others (response_names.h). Reader thread.
  StatusOr<ControllerMessage> ResolveNames(const wire::ControllerMessage& in,
                                           ControllerMessage message);
  // Checks the controller's proof and writes ours. Reader thread.
  Status AnswerChallenge(const wire::Challenge& challenge);
  // `retryable`: the stream ended before the Welcome in a way that MayRetry.
  void EndStream(const Status& error, bool retryable);
  // One attempt to join: opens a stream, says Hello, awaits the Welcome. On failure
  // `retryable` says whether the stream ended in a way that another attempt may cure.
  StatusOr<std::vector<PeerInfo>> Attempt(SteadyTime deadline, bool* retryable);
  // Cancels a failed attempt's stream, joins its reader and resets the per-stream state.
  void EndAttempt();
  // Connect's failure when the controller cannot be reached by the deadline.
  Status Unreachable(int rank, SteadyTime start, const Status& last_refusal);
  StatusOr<std::vector<PeerInfo>> AwaitWelcome(int rank, SteadyTime deadline);
  std::string Lost(const std::string& detail) const {
    return "lost the control stream to the controller (rank 0) at " + settings_.address + ": " +
           detail;
  }

  // Replaces channel_ and stub_ by new ones. Background thread, between attempts.
  void NewGrpcChannel() {
    channel_ = grpc::CreateCustomChannel(settings_.address, settings_.credentials,
                                         WorkerChannelArguments(settings_.timeout_seconds));
    stub_ = wire::Controller::NewStub(channel_);
  }
  // Waits until channel_ is connected; false at `deadline`.
  bool WaitForController(SteadyTime deadline);

  // Where and how to connect; constant after construction.
  struct Settings {
    std::string address;
    double timeout_seconds = 0;
    Logger logger;
    ControlSecurity security;
    Status credentials_error;  // a TLS file that could not be read fails Connect
    std::shared_ptr<grpc::ChannelCredentials> credentials;
  };
  const Settings settings_;

  // Background thread only; replaced only while no stream is open.
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<wire::Controller::Stub> stub_;

  // Background thread only (the reader uses them only between an attempt's start and its
  // join). One attempt (one stream) at a time; EndAttempt resets them for the next.
  std::unique_ptr<grpc::ClientContext> context_;  // TryCancel is thread-safe
  std::unique_ptr<SessionStream> stream_;
  std::function<void()> wake_;
  Hello hello_;               // what Connect sent; read by the reader thread after its start
  std::string worker_nonce_;  // likewise
  std::function<void(const Status&)> on_fatal_;
  std::thread reader_;
  bool closed_ = false;
  // What the reader thread learnt of the stream; EndAttempt resets it for the next one.
  struct ReaderState {
    bool challenged = false;
    bool saw_shutdown = false;
    bool welcomed = false;  // before the Welcome a failure is Connect's (no on_fatal_)
    ResponseNames names;    // what this stream was told
  };
  ReaderState read_;  // reader thread only

  // Orders Write/WritesDone (background thread) against Finish (reader thread).
  Mutex write_mu_;
  bool finished_ KOLO_GUARDED_BY(write_mu_) = false;  // Finish ran or WritesDone was sent

  Mutex mu_;
  CondVar changed_;  // with mu_: a message arrived or the stream ended
  std::deque<ControllerMessage> inbox_ KOLO_GUARDED_BY(mu_);
  bool reader_done_ KOLO_GUARDED_BY(mu_) = false;
  Status stream_error_ KOLO_GUARDED_BY(mu_);         // set with reader_done_
  bool retryable_end_ KOLO_GUARDED_BY(mu_) = false;  // set with reader_done_ (MayRetry)
  std::string generation_ KOLO_GUARDED_BY(mu_);      // from the Welcome
};

StatusOr<std::vector<PeerInfo>> GrpcControlChannel::Impl::Connect(const Hello& hello,
                                                                  SteadyTime deadline,
                                                                  std::function<void()> wake) {
  if (stream_ != nullptr || closed_) {
    return FailedPrecondition("the control channel to " + settings_.address + " was already used");
  }
  if (!settings_.credentials_error.ok()) return settings_.credentials_error;
  hello_ = hello;
  wake_ = std::move(wake);
  const SteadyTime start = std::chrono::steady_clock::now();
  // A controller that cannot serve this Hello yet (the previous job's controller, still
  // stopping on this port; docs/PROTOCOL.md "Joining") is retried like a refused
  // connection, with a short pause that doubles up to kMaxRetryPause, until the deadline.
  Status last_refusal;
  std::chrono::milliseconds pause = kFirstRetryPause;
  for (int attempt = 1;; ++attempt) {
    if (!WaitForController(deadline)) {
      return Unreachable(hello.rank, start, last_refusal);
    }
    bool retryable = false;
    StatusOr<std::vector<PeerInfo>> peers = Attempt(deadline, &retryable);
    if (peers.ok()) return peers;
    EndAttempt();
    if (!retryable) {
      closed_ = true;
      if (peers.status().code() != StatusCode::kDeadlineExceeded || last_refusal.ok()) {
        return peers.status();
      }
      return Status(peers.status().code(),
                    peers.status().message() + "; before that: " + last_refusal.message());
    }
    last_refusal = peers.status();
    settings_.logger->info(
        "rank {}: attempt {} to join the controller at {} did not take ({}); retrying", hello.rank,
        attempt, settings_.address, last_refusal.message());
    const SteadyTime retry_at = std::chrono::steady_clock::now() + pause;
    if (retry_at >= deadline) {
      closed_ = true;
      return DeadlineExceeded("rank " + std::to_string(hello.rank) + " could not join the " +
                              "controller (rank 0) at " + settings_.address + " in " +
                              SecondsText(SecondsSince(start)) + " (" + std::to_string(attempt) +
                              " attempts); the last: " + last_refusal.message());
    }
    std::this_thread::sleep_until(retry_at);  // a backoff, not a synchronisation
    pause = std::min(pause * 2, kMaxRetryPause);
  }
}

bool GrpcControlChannel::Impl::WaitForController(SteadyTime deadline) {
  for (;;) {
    const SteadyTime slice_end =
        std::min(deadline, std::chrono::steady_clock::now() + kConnectSlice);
    if (channel_->WaitForConnected(ToSystemClock(slice_end))) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // A channel whose connection got GOAWAY (the previous job's controller stopping) while it
    // was connecting can stay idle for good under gRPC 1.51, asked to connect or not: start
    // afresh. A controller not listening yet leaves it failing to connect, not idle.
    if (channel_->GetState(false) == GRPC_CHANNEL_IDLE) {
      settings_.logger->info("the channel to the controller at {} went idle; opening a new one",
                             settings_.address);
      NewGrpcChannel();
    }
  }
}

Status GrpcControlChannel::Impl::Unreachable(int rank, SteadyTime start,
                                             const Status& last_refusal) {
  closed_ = true;
  return DeadlineExceeded(
      "rank " + std::to_string(rank) + " could not reach the controller (rank 0) at " +
      settings_.address + " in " + SecondsText(SecondsSince(start)) + " (channel " +
      ChannelStateName(channel_->GetState(false)) + ")" +
      (last_refusal.ok() ? std::string() : "; before that: " + last_refusal.message()) +
      (settings_.security.tls_ca.empty()
           ? std::string()
           : "; with TLS on, a controller certificate that KOLO_TLS_CA='" +
                 settings_.security.tls_ca + "' does not verify fails the same way"));
}

StatusOr<std::vector<PeerInfo>> GrpcControlChannel::Impl::Attempt(SteadyTime deadline,
                                                                  bool* retryable) {
  // Fresh per attempt: each stream is its own proof.
  KOLO_ASSIGN_OR_RETURN(worker_nonce_, RandomBytes(kNonceBytes));
  context_ = std::make_unique<grpc::ClientContext>();
  stream_ = stub_->Session(context_.get());
  WorkerMessage message;
  message.kind = WorkerMessage::Kind::kHello;
  message.hello = hello_;
  {
    MutexLock lock(&write_mu_);
    // A failed write shows up as the end of the stream, which the reader reports.
    wire::WorkerMessage out = ToWire(message);
    out.mutable_hello()->set_worker_nonce(worker_nonce_);
    stream_->Write(out);
  }
  reader_ = std::thread([this] { ReaderLoop(); });
  StatusOr<std::vector<PeerInfo>> peers = AwaitWelcome(hello_.rank, deadline);
  if (!peers.ok()) {
    MutexLock lock(&mu_);
    *retryable = reader_done_ && retryable_end_;
  }
  return peers;
}

void GrpcControlChannel::Impl::EndAttempt() {
  if (context_ != nullptr) context_->TryCancel();  // the reader's Read returns at once
  if (reader_.joinable()) reader_.join();
  // Back to the state before Attempt; the reader has exited, so nothing else touches these.
  stream_.reset();
  context_.reset();
  read_ = ReaderState{};
  {
    MutexLock lock(&write_mu_);
    finished_ = false;
  }
  MutexLock lock(&mu_);
  inbox_.clear();
  reader_done_ = false;
  retryable_end_ = false;
  stream_error_ = Status::Ok();
  generation_.clear();
}

StatusOr<std::vector<PeerInfo>> GrpcControlChannel::Impl::AwaitWelcome(int rank,
                                                                       SteadyTime deadline) {
  MutexLock lock(&mu_);
  if (!changed_.WaitUntil(&mu_, deadline,
                          [&]() KOLO_REQUIRES(mu_) { return !inbox_.empty() || reader_done_; })) {
    return DeadlineExceeded("rank " + std::to_string(rank) + ": no Welcome from the controller " +
                            "at " + settings_.address +
                            " by the deadline (have all ranks started?)");
  }
  if (inbox_.empty()) return stream_error_;
  ControllerMessage first = std::move(inbox_.front());
  inbox_.pop_front();
  return PeersFromFirstMessage(std::move(first), "the controller at " + settings_.address, rank);
}

void GrpcControlChannel::Impl::ReaderLoop() {
  Status error;
  bool retryable = false;
  bool heard = false;  // a message other than the Challenge arrived
  try {
    wire::ControllerMessage in;
    while (stream_->Read(&in)) {
      if (in.kind_case() == wire::ControllerMessage::kChallenge) {
        error = AnswerChallenge(in.challenge());
        if (!error.ok()) {
          context_->TryCancel();
          break;
        }
        continue;
      }
      if (in.kind_case() == wire::ControllerMessage::kWelcome) {
        MutexLock lock(&mu_);
        generation_ = in.welcome().generation();
        read_.welcomed = true;
      }
      StatusOr<ControllerMessage> message = FromWire(in);
      if (message.ok()) message = ResolveNames(in, std::move(message).value());
      if (!message.ok()) {
        error = Internal(Lost("malformed message: " + message.status().message()));
        context_->TryCancel();
        break;
      }
      heard = true;
      const ControllerMessage::Kind kind = message->kind;
      const std::string reason = message->reason;
      {
        MutexLock lock(&mu_);
        inbox_.push_back(std::move(message).value());
      }
      changed_.NotifyAll();
      if (wake_) wake_();
      if (kind == ControllerMessage::Kind::kShutdown) read_.saw_shutdown = true;
      if (kind == ControllerMessage::Kind::kAbort && read_.welcomed && on_fatal_) {
        on_fatal_(Aborted(reason));
      }
    }
    MutexLock lock(&write_mu_);
    const grpc::Status final_status = stream_->Finish();
    finished_ = true;
    if (error.ok()) {
      error = Unavailable(Lost(final_status.ok() ? "the controller ended the stream"
                                                 : GrpcStatusText(final_status)));
      retryable = !heard && MayRetry(final_status);
    }
  } catch (const std::exception& e) {  // third-party code (gRPC, protobuf) at a thread boundary
    error = Internal(Lost(std::string("exception in the reader thread: ") + e.what()));
  }
  EndStream(error, retryable);
}

StatusOr<ControllerMessage> GrpcControlChannel::Impl::ResolveNames(
    const wire::ControllerMessage& in, ControllerMessage message) {
  if (message.kind != ControllerMessage::Kind::kResponses) return message;
  for (size_t i = 0; i < message.responses.size(); ++i) {
    if (in.responses().responses(static_cast<int>(i)).by_id()) {
      KOLO_RETURN_IF_ERROR(read_.names.Fill(&message.responses[i]));
    } else {
      read_.names.Learn(message.responses[i]);
    }
  }
  return message;
}

Status GrpcControlChannel::Impl::AnswerChallenge(const wire::Challenge& challenge) {
  if (read_.challenged) return Internal(Lost("the controller sent a second challenge"));
  read_.challenged = true;
  const std::string expected =
      ControlProof(settings_.security.credentials, ControlRole::kController, hello_, worker_nonce_,
                   challenge.controller_nonce());
  if (challenge.controller_nonce().size() != kNonceBytes ||
      !MacEquals(challenge.controller_proof(), expected)) {
    return Aborted("the controller at " + settings_.address +
                   " could not prove that it holds this job's secret " +
                   "(a different KOLO_SECRET or KOLO_JOB_ID, or not this job's controller); rank " +
                   std::to_string(hello_.rank) + " did not answer its challenge");
  }
  wire::WorkerMessage answer;
  answer.mutable_proof()->set_proof(ControlProof(settings_.security.credentials,
                                                 ControlRole::kWorker, hello_, worker_nonce_,
                                                 challenge.controller_nonce()));
  MutexLock lock(&write_mu_);
  if (!finished_) stream_->Write(answer);  // a failure shows up as the end of the stream
  return Status::Ok();
}

void GrpcControlChannel::Impl::EndStream(const Status& error, bool retryable) {
  {
    MutexLock lock(&mu_);
    reader_done_ = true;
    stream_error_ = error;
    retryable_end_ = retryable;
  }
  changed_.NotifyAll();
  if (wake_) wake_();
  if (read_.welcomed && !read_.saw_shutdown && on_fatal_) on_fatal_(error);
}

Status GrpcControlChannel::Impl::Send(const WorkerMessage& message) {
  if (stream_ == nullptr || closed_) {
    return FailedPrecondition("the control channel to " + settings_.address + " is " +
                              (closed_ ? "closed" : "not connected"));
  }
  {
    MutexLock lock(&mu_);
    if (reader_done_) return stream_error_;
  }
  MutexLock lock(&write_mu_);
  if (finished_ || !stream_->Write(ToWire(message))) {
    return Unavailable(Lost("the write failed (the stream is closing)"));
  }
  return Status::Ok();
}

StatusOr<std::optional<ControllerMessage>> GrpcControlChannel::Impl::TryReceive() {
  MutexLock lock(&mu_);
  if (!inbox_.empty()) {
    ControllerMessage message = std::move(inbox_.front());
    inbox_.pop_front();
    return std::optional<ControllerMessage>(std::move(message));
  }
  if (reader_done_) return stream_error_;
  if (stream_ == nullptr) {
    return FailedPrecondition("the control channel to " + settings_.address + " is not connected");
  }
  return std::optional<ControllerMessage>();
}

void GrpcControlChannel::Impl::Close(SteadyTime deadline) {
  if (closed_) return;
  closed_ = true;
  if (stream_ == nullptr) return;
  {
    MutexLock lock(&write_mu_);
    if (!finished_) {
      finished_ = true;
      stream_->WritesDone();
    }
  }
  {
    MutexLock lock(&mu_);
    if (!changed_.WaitUntil(&mu_, deadline, [&]() KOLO_REQUIRES(mu_) { return reader_done_; })) {
      context_->TryCancel();  // the reader's Read returns at once
    }
  }
  reader_.join();
}

GrpcControlChannel::GrpcControlChannel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcControlChannel::~GrpcControlChannel() {
  Close(std::chrono::steady_clock::now());
}

std::unique_ptr<GrpcControlChannel> GrpcControlChannel::Create(
    const std::string& controller_address, double timeout_seconds, Logger logger,
    const ControlSecurity& security) {
  SetUpGrpcProcess();
  if (!logger) logger = MakeLogger(-1, "control-channel", spdlog::level::warn);
  return std::unique_ptr<GrpcControlChannel>(new GrpcControlChannel(
      std::make_unique<Impl>(controller_address, timeout_seconds, std::move(logger), security,
                             MakeChannelCredentials(security))));
}

std::string GrpcControlChannel::generation() const {
  return impl_->generation();
}

StatusOr<std::vector<PeerInfo>> GrpcControlChannel::Connect(
    const Hello& hello, std::chrono::steady_clock::time_point deadline,
    std::function<void()> wake) {
  return impl_->Connect(hello, deadline, std::move(wake));
}

void GrpcControlChannel::SetFatalHandler(std::function<void(const Status&)> on_fatal) {
  impl_->SetFatalHandler(std::move(on_fatal));
}

Status GrpcControlChannel::Send(const WorkerMessage& message) {
  return impl_->Send(message);
}

StatusOr<std::optional<ControllerMessage>> GrpcControlChannel::TryReceive() {
  return impl_->TryReceive();
}

void GrpcControlChannel::Close(std::chrono::steady_clock::time_point deadline) {
  impl_->Close(deadline);
}

}  // namespace kolo::transport
