#include "transport/grpc/relay_intake.h"

#include <algorithm>

#include "transport/grpc/control_sessions.h"
#include "transport/grpc/relay_routes.h"
#include "transport/grpc/wire_convert.h"

namespace kolo::transport {

Status RelayIntake::Take(const wire::RelayBatch& batch) {
  ControllerHandler* handler = sessions_->config().handler;
  for (const wire::RelayItem& item : batch.items()) {
    const int rank = item.rank();
    if (item.kind_case() == wire::RelayItem::kMessage &&
        item.message().kind_case() == wire::WorkerMessage::kHello) {
      KOLO_RETURN_IF_ERROR(TakeHello(rank, item.message()));
      continue;
    }
    if (std::find(members_.begin(), members_.end(), rank) == members_.end()) {
      // A member refused (or already ended) whose stream's end or last words the relay read
      // before it heard of that: nothing of the job's.
      sessions_->config().logger->debug(
          "control relay {}: dropped an item of rank {}, not a member", name_, rank);
      continue;
    }
    switch (item.kind_case()) {
      case wire::RelayItem::kMessage:
        KOLO_RETURN_IF_ERROR(FromWire(item.message(), &scratch_));
        handler->OnMessage(rank, scratch_);
        break;
      case wire::RelayItem::kLost:
        if (Drop(rank)) {
          handler->OnStreamClosed(
              rank, Unavailable(item.lost() + " (reported by its control relay " + name_ + ")"));
        }
        break;
      case wire::RelayItem::kClosed:
        if (Drop(rank)) handler->OnStreamClosed(rank, Status::Ok());
        break;
      case wire::RelayItem::KIND_NOT_SET:
        return InvalidArgument("an item of rank " + std::to_string(rank) + " is empty");
    }
  }
  return Status::Ok();
}

Status RelayIntake::TakeHello(int rank, const wire::WorkerMessage& message) {
  KOLO_ASSIGN_OR_RETURN(WorkerMessage hello, FromWire(message));
  if (hello.hello.rank != rank) {
    return InvalidArgument("the Hello of rank " + std::to_string(hello.hello.rank) +
                           " came as rank " + std::to_string(rank) + "'s");
  }
  const Status registered = sessions_->RegisterRelayed(rank, relay_);
  if (!registered.ok()) {
    Refuse(rank, registered.message());
    return Status::Ok();
  }
  members_.push_back(rank);
  const Status admitted = sessions_->config().handler->OnHello(hello.hello);
  if (admitted.ok()) {
    sessions_->config().logger->debug("rank {} joined through control relay {}", rank, name_);
  } else {
    Drop(rank);
    Refuse(rank, admitted.code() == StatusCode::kUnavailable
                     ? "the controller turned rank " + std::to_string(rank) +
                           " away for now: " + admitted.message()
                     : admitted.message());
  }
  return Status::Ok();
}

void RelayIntake::Refuse(int rank, const std::string& reason) {
  sessions_->config().logger->warn("refused rank {} through control relay {}: {}", rank, name_,
                                   reason);
  wire::ControllerMessage abort;
  abort.mutable_abort()->set_reason(reason);
  (void)relay_->Enqueue(RelayRoutes::Envelope({rank}, abort.SerializeAsString()));
}

bool RelayIntake::Drop(int rank) {
  auto it = std::find(members_.begin(), members_.end(), rank);
  if (it == members_.end()) return false;
  members_.erase(it);
  return sessions_->UnregisterRelayed(rank, relay_);
}

void RelayIntake::LoseAll(const Status& why) {
  const std::vector<int> lost = members_;
  for (int rank : lost) {
    if (!Drop(rank)) continue;
    sessions_->config().handler->OnStreamClosed(
        rank, Unavailable("its control relay " + name_ + " ended: " + why.message()));
  }
}

}  // namespace kolo::transport
