#include "transport/grpc/control_sessions.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "transport/grpc/wire_convert.h"

namespace kolo::transport {
namespace {

wire::ControllerMessage WireOf(const ControllerMessage& message, const std::string& generation) {
  wire::ControllerMessage out = ToWire(message);
  if (message.kind == ControllerMessage::Kind::kWelcome) {
    out.mutable_welcome()->set_generation(generation);
  }
  return out;
}

}  // namespace

ControlSessions::ControlSessions(Config config, std::string generation)
    : config_(std::move(config)),
      generation_(std::move(generation)),
      refusals_(config_.logger, "control stream"),
      reaper_(config_.logger) {}

ControlSessions::~ControlSessions() = default;

void ControlSessions::AcceptNext() {
  {
    MutexLock lock(&mu_);
    ++live_;
  }
  auto* session = new ControlSession(this, config_.service, config_.cq);  // deletes itself
  session->Accept();
}

void ControlSessions::SessionEnded() {
  MutexLock lock(&mu_);
  --live_;
  drained_.NotifyAll();
}

bool ControlSessions::ShutDownQueue(SteadyTime deadline) {
  bool ended = false;
  {
    MutexLock lock(&mu_);
    ended = drained_.WaitUntil(&mu_, deadline, [&]() KOLO_REQUIRES(mu_) { return live_ == 0; });
  }
  config_.cq->Shutdown();
  if (queue_thread_.joinable()) queue_thread_.join();
  reaper_.Join();
  return ended;
}

void ControlSessions::Serve() {
  AcceptNext();
  queue_thread_ = std::thread([this] {
    void* tag = nullptr;
    bool ok = false;
    while (config_.cq->Next(&tag, &ok)) {
      try {
        AsyncSessionStream::Dispatch(tag, ok);
      } catch (const std::exception& e) {  // third-party code at a thread boundary
        config_.logger->error("control stream event failed: {}", e.what());
      }
    }
  });
}

Status ControlSessions::Register(ControlSession* session) {
  MutexLock lock(&mu_);
  if (stopping_) return Unavailable("the controller is shutting down");
  auto [it, fresh] = streams_.try_emplace(session->rank(), session);
  if (!fresh) {
    return FailedPrecondition("rank " + std::to_string(session->rank()) +
                              " already has a control stream");
  }
  told_.Clear();  // this stream has heard none of the names the others were told
  return Status::Ok();
}

void ControlSessions::Unregister(ControlSession* session) {
  MutexLock lock(&mu_);
  auto it = streams_.find(session->rank());
  if (it != streams_.end() && it->second == session) streams_.erase(it);
  drained_.NotifyAll();
}

Status ControlSessions::RegisterRelayed(int rank, ControlSession* relay) {
  MutexLock lock(&mu_);
  if (stopping_) return Unavailable("the controller is shutting down");
  auto [it, fresh] = streams_.try_emplace(rank, relay);
  if (!fresh) {
    return FailedPrecondition("rank " + std::to_string(rank) + " already has a control stream");
  }
  relays_.Joined(relay);
  told_.Clear();  // this rank has heard none of the names the others were told
  return Status::Ok();
}

bool ControlSessions::UnregisterRelayed(int rank, ControlSession* relay) {
  MutexLock lock(&mu_);
  auto it = streams_.find(rank);
  if (it == streams_.end() || it->second != relay) return false;
  streams_.erase(it);
  relays_.Left(relay);
  drained_.NotifyAll();
  return true;
}

void ControlSessions::Forward(const std::vector<int>& ranks, const std::string& message) {
  grpc::Slice slice(message);
  const Encoded encoded = std::make_shared<const grpc::ByteBuffer>(&slice, 1);
  MutexLock lock(&mu_);  // even while stopping: the controller's Shutdown must reach them
  if (ranks.empty()) {
    for (const auto& [rank, session] : streams_) (void)session->Enqueue(encoded);
    return;
  }
  for (int rank : ranks) {
    auto it = streams_.find(rank);
    if (it != streams_.end()) (void)it->second->Enqueue(encoded);
  }
}

bool ControlSessions::stopping() const {
  MutexLock lock(&mu_);
  return stopping_;
}

SteadyTime ControlSessions::FlushDeadline() const {
  const SteadyTime deadline = AddSeconds(std::chrono::steady_clock::now(), config_.timeout_seconds);
  MutexLock lock(&mu_);
  return stopping_ ? std::min(deadline, stop_deadline_) : deadline;
}

Encoded ControlSessions::Encode(const wire::ControllerMessage& message) {
  grpc::ByteBuffer buffer;
  bool own = false;
  // Serializing a message we built cannot fail but for its size, which kolo bounds.
  (void)grpc::SerializationTraits<wire::ControllerMessage>::Serialize(message, &buffer, &own);
  return std::make_shared<const grpc::ByteBuffer>(std::move(buffer));
}

Encoded ControlSessions::Encode(const ControllerMessage& message) const {
  return Encode(WireOf(message, generation_));
}

wire::ControllerMessage ControlSessions::WireForEachLocked(bool every_stream,
                                                           const ControllerMessage& message) {
  if (message.kind != ControllerMessage::Kind::kResponses || !every_stream) {
    return WireOf(message, generation_);
  }
  wire::ControllerMessage out;
  wire::ResponseBatch* batch = out.mutable_responses();
  for (const Response& response : message.responses) {
    if (told_.CanGoById(response)) {
      ToWireById(response, batch->add_responses());
    } else {
      ToWire(response, batch->add_responses());
      told_.Learn(response);
    }
  }
  return out;
}

void ControlSessions::LogDropped(const ControllerMessage& message, int rank,
                                 const char* because) const {
  // A Pong only answers a clock sample for the timeline, which a stopping job no longer needs:
  // dropping one is routine (clean shutdowns right after init dropped them and warned).
  const spdlog::level::level_enum level =
      message.kind == ControllerMessage::Kind::kPong ? spdlog::level::debug : spdlog::level::warn;
  config_.logger->log(level, "dropped a {} message for rank {}: {}", KindName(message.kind), rank,
                      because);
}

void ControlSessions::Send(int rank, const ControllerMessage& message) {
  const wire::ControllerMessage out = WireOf(message, generation_);
  const Encoded encoded = Encode(out);  // outside the lock: the writers keep writing
  const char* dropped_because = nullptr;
  {
    MutexLock lock(&mu_);
    auto it = streams_.find(rank);
    if (stopping_) {
      dropped_because = "the controller is stopping";
    } else if (it == streams_.end()) {
      dropped_because = "it has no control stream";
    } else if (it->second->relay()) {
      dropped_because = it->second->Enqueue(RelayRoutes::Envelope({rank}, out.SerializeAsString()));
    } else {
      dropped_because = it->second->Enqueue(encoded);
    }
  }
  if (dropped_because != nullptr) LogDropped(message, rank, dropped_because);
}

void ControlSessions::SendToEach(int size, int skip, const ControllerMessage& message) {
  std::vector<std::pair<int, const char*>> dropped;
  {
    MutexLock lock(&mu_);
    // Each target's stream, found once (a lookup per rank per broadcast).
    targets_.clear();
    for (int rank = 0; rank < size; ++rank) {
      if (rank == skip) continue;
      auto it = streams_.find(rank);
      targets_.push_back(it == streams_.end() ? nullptr : it->second);
    }
    // By id only where every admitted stream gets this message and got the ones before it.
    const bool every_stream =
        targets_.size() == streams_.size() &&
        std::find(targets_.begin(), targets_.end(), nullptr) == targets_.end();
    const wire::ControllerMessage out = WireForEachLocked(every_stream, message);
    const Encoded encoded = Encode(out);  // once for every copy
    relays_.Begin();
    size_t next = 0;
    for (int rank = 0; rank < size; ++rank) {
      if (rank == skip) continue;
      ControlSession* session = targets_[next++];
      if (!stopping_ && session != nullptr && session->relay()) {
        relays_.Add(session, rank);  // once per relay, below
        continue;
      }
      const char* because = stopping_            ? "the controller is stopping"
                            : session == nullptr ? "it has no control stream"
                                                 : session->Enqueue(encoded);
      if (because != nullptr) dropped.emplace_back(rank, because);
    }
    relays_.Deliver(out, &dropped);
  }
  for (const auto& [rank, because] : dropped) LogDropped(message, rank, because);
}

void ControlSessions::StopStreams(SteadyTime deadline) {
  MutexLock lock(&mu_);
  stopping_ = true;
  stop_deadline_ = deadline;
  // Queued messages keep flowing: wait for the workers to end their streams (they do once
  // they have read Shutdown), and cancel only what is left at the deadline.
  drained_.WaitUntil(&mu_, deadline, [&]() KOLO_REQUIRES(mu_) { return streams_.empty(); });
  for (const auto& [rank, session] : streams_) session->context()->TryCancel();
}

void ControlSessions::StopHandshakes() {
  reaper_.CancelAllAndStop();
}

void ControlSessions::SetDeadline(ControlSession* session, SteadyTime deadline, bool flushing) {
  reaper_.Set(session, deadline, flushing);
}

void ControlSessions::ClearDeadline(ControlSession* session) {
  reaper_.Clear(session);
}

}  // namespace kolo::transport
