#include "transport/grpc/relay_uplink.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "proto/kolo.grpc.pb.h"
#include "transport/grpc/grpc_credentials.h"
#include "transport/grpc/grpc_keepalive.h"
#include "transport/grpc/grpc_process.h"
#include "transport/grpc/wire_convert.h"

namespace kolo::transport {

struct RelayUplink::Stream {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<wire::Controller::Stub> stub;
  grpc::ClientContext context;  // TryCancel is thread-safe
  std::unique_ptr<grpc::ClientReaderWriter<wire::WorkerMessage, wire::ControllerMessage>> rpc;
  std::string worker_nonce;
  Mutex write_mu;  // orders writes (writer thread, the reader's proof) against WritesDone
  bool writes_done KOLO_GUARDED_BY(write_mu) = false;
};

RelayUplink::RelayUplink(Settings settings, Deliver deliver,
                         std::function<void(const Status&)> lost)
    : settings_(std::move(settings)), deliver_(std::move(deliver)), lost_(std::move(lost)) {}

RelayUplink::~RelayUplink() {
  Close(std::chrono::steady_clock::now());
}

std::string RelayUplink::Lost(const std::string& detail) const {
  return "the control relay in rank " + std::to_string(settings_.hello.rank) +
         " lost its stream to the controller at " + settings_.controller_address + ": " + detail;
}

Status RelayUplink::Connect(SteadyTime deadline) {
  SetUpGrpcProcess();
  KOLO_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                        MakeChannelCredentials(settings_.security));
  stream_ = std::make_unique<Stream>();
  KOLO_ASSIGN_OR_RETURN(stream_->worker_nonce, RandomBytes(kNonceBytes));
  stream_->channel = grpc::CreateCustomChannel(settings_.controller_address, credentials,
                                               WorkerChannelArguments(settings_.timeout_seconds));
  if (!stream_->channel->WaitForConnected(ToSystemClock(deadline))) {
    return Unavailable("the control relay in rank " + std::to_string(settings_.hello.rank) +
                       " could not reach the controller at " + settings_.controller_address);
  }
  stream_->stub = wire::Controller::NewStub(stream_->channel);
  stream_->rpc = stream_->stub->Session(&stream_->context);
  WorkerMessage hello;
  hello.kind = WorkerMessage::Kind::kHello;
  hello.hello = settings_.hello;
  wire::WorkerMessage out = ToWire(hello);
  out.mutable_hello()->set_worker_nonce(stream_->worker_nonce);
  out.mutable_hello()->set_relay(true);
  Write(out);  // a failed write shows up as the end of the stream, which the reader reports
  reader_ = std::thread([this] { ReaderLoop(); });
  MutexLock lock(&mu_);
  if (!changed_.WaitUntil(&mu_, deadline, [&]() KOLO_REQUIRES(mu_) { return handshake_done_; })) {
    stream_->context.TryCancel();
    return DeadlineExceeded(Lost("no challenge from the controller by the deadline"));
  }
  if (handshake_.ok()) writer_ = std::thread([this] { WriterLoop(); });
  return handshake_;
}

Status RelayUplink::AnswerChallenge(const wire::ControllerMessage& first) {
  if (first.kind_case() != wire::ControllerMessage::kChallenge) {
    return Aborted(Lost(first.kind_case() == wire::ControllerMessage::kAbort
                            ? "refused: " + first.abort().reason()
                            : "the controller's first message was not its challenge"));
  }
  const wire::Challenge& challenge = first.challenge();
  const std::string expected =
      ControlProof(settings_.security.credentials, ControlRole::kController, settings_.hello,
                   stream_->worker_nonce, challenge.controller_nonce());
  if (challenge.controller_nonce().size() != kNonceBytes ||
      !MacEquals(challenge.controller_proof(), expected)) {
    return Aborted(Lost("the controller could not prove that it holds this job's secret"));
  }
  wire::WorkerMessage answer;
  answer.mutable_proof()->set_proof(
      ControlProof(settings_.security.credentials, ControlRole::kWorker, settings_.hello,
                   stream_->worker_nonce, challenge.controller_nonce()));
  Write(answer);
  return Status::Ok();
}

void RelayUplink::ReaderLoop() {
  wire::ControllerMessage in;
  bool first = true;
  while (stream_->rpc->Read(&in)) {
    if (first) {
      first = false;
      const Status answered = AnswerChallenge(in);
      {
        MutexLock lock(&mu_);
        handshake_ = answered;
        handshake_done_ = true;
      }
      changed_.NotifyAll();
      if (!answered.ok()) {
        stream_->context.TryCancel();
        break;
      }
      continue;
    }
    if (in.kind_case() == wire::ControllerMessage::kRelayed) {
      const wire::RelayDown& down = in.relayed();
      deliver_(std::vector<int>(down.ranks().begin(), down.ranks().end()), down.message());
    } else if (in.kind_case() == wire::ControllerMessage::kAbort) {
      deliver_({}, in.SerializeAsString());  // for every member
    }
  }
  const grpc::Status status = stream_->rpc->Finish();
  bool report = false;
  {
    MutexLock lock(&mu_);
    if (!handshake_done_) {
      handshake_ =
          Unavailable(Lost("the stream ended before the challenge: " + status.error_message()));
      handshake_done_ = true;
    }
    report = !closing_;
    closing_ = true;  // the writer stops
  }
  changed_.NotifyAll();
  if (report && lost_) {
    lost_(Unavailable(Lost(status.ok() ? "the controller ended it" : status.error_message())));
  }
}

void RelayUplink::Queue(wire::RelayItem item) {
  bool wake = false;
  {
    MutexLock lock(&mu_);
    const bool message = item.kind_case() == wire::RelayItem::kMessage;
    const auto kind = message ? item.message().kind_case() : wire::WorkerMessage::KIND_NOT_SET;
    if (kind == wire::WorkerMessage::kHello) ++live_;
    if (!message) --live_;
    if (kind == wire::WorkerMessage::kRequests) {
      if (std::find(requested_.begin(), requested_.end(), item.rank()) != requested_.end()) {
        urgent_ = true;  // a member's second batch before the first went: send both now
      }
      requested_.push_back(item.rank());
    } else {
      urgent_ = true;
    }
    const bool first = gathered_.items_size() == 0;
    if (first) first_at_ = std::chrono::steady_clock::now();
    *gathered_.add_items() = std::move(item);
    // The first item sets the writer's deadline (the cycle time from now).
    wake = first || DueLocked(std::chrono::steady_clock::now());
  }
  if (wake) changed_.NotifyAll();
}

bool RelayUplink::DueLocked(SteadyTime now) const {
  if (gathered_.items_size() == 0) return false;
  return urgent_ || static_cast<int>(requested_.size()) >= live_ ||
         now >= first_at_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(settings_.cycle_seconds));
}

void RelayUplink::WriterLoop() {
  const auto cycle = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(settings_.cycle_seconds));
  wire::WorkerMessage out;
  for (;;) {
    {
      MutexLock lock(&mu_);
      for (;;) {
        const SteadyTime now = std::chrono::steady_clock::now();
        if (closing_ || DueLocked(now)) break;  // closing: what is gathered goes now
        // Empty: until the first item (which sets the deadline) or a second, to look again.
        const bool empty = gathered_.items_size() == 0;
        const SteadyTime until = empty ? now + std::chrono::seconds(1) : first_at_ + cycle;
        changed_.WaitUntil(&mu_, until, [&]() KOLO_REQUIRES(mu_) {
          return closing_ || (empty && gathered_.items_size() > 0) ||
                 DueLocked(std::chrono::steady_clock::now());
        });
      }
      if (gathered_.items_size() == 0) return;  // closing, nothing left
      out.mutable_relayed()->Swap(&gathered_);
      gathered_.Clear();
      requested_.clear();
      urgent_ = false;
    }
    if (!Write(out)) return;  // the stream broke: the reader reports it
    out.Clear();
  }
}

bool RelayUplink::Write(const wire::WorkerMessage& message) {
  MutexLock lock(&stream_->write_mu);
  if (stream_->writes_done) return false;
  return stream_->rpc->Write(message);
}

void RelayUplink::Close(SteadyTime deadline) {
  {
    MutexLock lock(&mu_);
    if (stream_ == nullptr) return;
    closing_ = true;
  }
  changed_.NotifyAll();
  // A write held back by flow control, or a controller that never ends the stream, is cut off
  // at the deadline: the canceller runs until everything below returned.
  Mutex done_mu;
  CondVar done;
  bool finished = false;
  std::thread canceller([&] {
    MutexLock lock(&done_mu);
    if (!done.WaitUntil(&done_mu, deadline, [&]() KOLO_REQUIRES(done_mu) { return finished; })) {
      stream_->context.TryCancel();
    }
  });
  if (writer_.joinable()) writer_.join();  // it sends what was gathered first
  {
    MutexLock lock(&stream_->write_mu);
    if (!stream_->writes_done && stream_->rpc != nullptr) {
      stream_->writes_done = true;
      stream_->rpc->WritesDone();
    }
  }
  if (reader_.joinable()) reader_.join();  // the controller ends the stream after the half-close
  {
    MutexLock lock(&done_mu);
    finished = true;
  }
  done.NotifyAll();
  canceller.join();
  MutexLock lock(&mu_);
  stream_.reset();
}

}  // namespace kolo::transport
