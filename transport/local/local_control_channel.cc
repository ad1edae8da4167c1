#include "transport/local/local_control_channel.h"

#include <utility>

namespace kolo {

LocalControlChannel::LocalControlChannel(int rank, ControllerHandler* handler,
                                         ControllerOutbox* remote, std::string generation)
    : rank_(rank), handler_(handler), remote_(remote), generation_(std::move(generation)) {}

StatusOr<std::vector<PeerInfo>> LocalControlChannel::Connect(
    const Hello& hello, std::chrono::steady_clock::time_point deadline,
    std::function<void()> wake) {
  if (connected_ || closed_) {
    return FailedPrecondition("rank " + std::to_string(hello.rank) +
                              "'s local control channel was already used");
  }
  if (hello.rank != rank_) {
    return InvalidArgument("the local control channel belongs to rank " + std::to_string(rank_) +
                           ", not rank " + std::to_string(hello.rank));
  }
  connected_ = true;
  {
    MutexLock lock(&mu_);
    wake_ = std::move(wake);
  }
  Status admitted = handler_->OnHello(hello);
  if (!admitted.ok()) {
    return Aborted("the controller in this process refused rank " + std::to_string(rank_) + ": " +
                   admitted.message());
  }
  MutexLock lock(&mu_);
  if (!arrived_.WaitUntil(&mu_, deadline, [&]() KOLO_REQUIRES(mu_) { return !inbox_.empty(); })) {
    return DeadlineExceeded("rank " + std::to_string(rank_) +
                            ": no Welcome from the controller in this process by the deadline " +
                            "(have all ranks started?)");
  }
  ControllerMessage first = std::move(inbox_.front());
  inbox_.pop_front();
  return PeersFromFirstMessage(std::move(first), "the controller in this process", rank_);
}

void LocalControlChannel::SetFatalHandler(std::function<void(const Status&)> on_fatal) {
  MutexLock lock(&mu_);
  on_fatal_ = std::move(on_fatal);
}

Status LocalControlChannel::Send(const WorkerMessage& message) {
  if (!connected_ || closed_) {
    return FailedPrecondition(std::string("the local control channel is ") +
                              (closed_ ? "closed" : "not connected"));
  }
  if (message.kind == WorkerMessage::Kind::kShutdown) sent_shutdown_ = true;
  handler_->OnMessage(rank_, message);
  return Status::Ok();
}

StatusOr<std::optional<ControllerMessage>> LocalControlChannel::TryReceive() {
  MutexLock lock(&mu_);
  if (inbox_.empty()) return std::optional<ControllerMessage>();
  ControllerMessage message = std::move(inbox_.front());
  inbox_.pop_front();
  return std::optional<ControllerMessage>(std::move(message));
}

void LocalControlChannel::Close(std::chrono::steady_clock::time_point /*deadline*/) {
  if (closed_) return;
  closed_ = true;
  if (!connected_) return;
  handler_->OnStreamClosed(
      rank_, sent_shutdown_ ? Status::Ok()
                            : Unavailable("rank " + std::to_string(rank_) +
                                          " left without a shutdown notice (its runtime was "
                                          "torn down after an error)"));
}

void LocalControlChannel::Send(int rank, const ControllerMessage& message) {
  if (rank == rank_) {
    Deliver(message);
  } else {
    remote_->Send(rank, message);
  }
}

void LocalControlChannel::SendToAll(int size, const ControllerMessage& message) {
  remote_->SendToEach(size, rank_, message);
  if (rank_ < size) Deliver(message);
}

void LocalControlChannel::Deliver(const ControllerMessage& message) {
  std::function<void()> wake;
  std::function<void(const Status&)> on_fatal;
  {
    MutexLock lock(&mu_);
    inbox_.push_back(message);
    if (message.kind == ControllerMessage::Kind::kShutdown) saw_shutdown_ = true;
    wake = wake_;
    if (message.kind == ControllerMessage::Kind::kAbort && !saw_shutdown_) on_fatal = on_fatal_;
  }
  arrived_.NotifyAll();
  if (wake) wake();
  if (on_fatal) on_fatal(Aborted(message.reason));
}

}  // namespace kolo
