#include "transport/grpc/control_relay.h"

#include <utility>

#include "transport/grpc/grpc_control_server.h"
#include "transport/grpc/relay_uplink.h"
#include "transport/grpc/wire_convert.h"

namespace kolo::transport {

ControlRelay::ControlRelay(RelayOptions options) : options_(std::move(options)) {}

StatusOr<std::unique_ptr<ControlRelay>> ControlRelay::Start(RelayOptions options,
                                                            SteadyTime deadline) {
  if (options.logger == nullptr) {
    options.logger = MakeLogger(options.host_rank, "control-relay", spdlog::level::warn);
  }
  std::unique_ptr<ControlRelay> relay(new ControlRelay(std::move(options)));
  const RelayOptions& o = relay->options_;
  RelayUplink::Settings settings;
  settings.controller_address = o.controller_address;
  settings.hello.rank = o.host_rank;
  settings.hello.size = o.size;
  settings.hello.host = o.host;
  settings.timeout_seconds = o.timeout_seconds;
  settings.cycle_seconds = o.cycle_seconds;
  settings.security = o.security;
  settings.logger = o.logger;
  ControlRelay* self = relay.get();
  // Before the server: a member that was already retrying may say Hello at once, and its
  // Hello is queued on the uplink (which sends nothing before Connect). The server is up before
  // the uplink's reader, the only caller of the two callbacks, starts.
  relay->uplink_ = std::make_unique<RelayUplink>(
      std::move(settings),
      [self](const std::vector<int>& ranks, const std::string& message) {
        self->server_->Forward(ranks, message);
      },
      [self](const Status& why) { self->UplinkLost(why); });
  KOLO_ASSIGN_OR_RETURN(relay->server_,
                        GrpcControlServer::Start(o.listen_address, relay.get(), o.timeout_seconds,
                                                 o.logger, o.security, o.members));
  KOLO_RETURN_IF_ERROR(relay->uplink_->Connect(deadline));
  return relay;
}

ControlRelay::~ControlRelay() {
  Stop(std::chrono::steady_clock::now());
}

int ControlRelay::port() const {
  return server_->port();
}

void ControlRelay::Stop(SteadyTime deadline) {
  if (server_ != nullptr) server_->Stop(deadline);
  if (uplink_ != nullptr) uplink_->Close(deadline);
}

Status ControlRelay::OnHello(const Hello& hello) {
  if (hello.rank < options_.first_member ||
      hello.rank >= options_.first_member + options_.members) {
    return FailedPrecondition(
        "rank " + std::to_string(hello.rank) + " is not a member of the control relay in rank " +
        std::to_string(options_.host_rank) + " (ranks " + std::to_string(options_.first_member) +
        " to " + std::to_string(options_.first_member + options_.members - 1) + ")");
  }
  WorkerMessage message;
  message.kind = WorkerMessage::Kind::kHello;
  message.hello = hello;
  OnMessage(hello.rank, message);
  return Status::Ok();
}

void ControlRelay::OnMessage(int rank, const WorkerMessage& message) {
  wire::RelayItem item;
  item.set_rank(rank);
  *item.mutable_message() = ToWire(message);
  uplink_->Queue(std::move(item));
}

void ControlRelay::OnStreamClosed(int rank, const Status& why) {
  wire::RelayItem item;
  item.set_rank(rank);
  if (why.ok()) {
    item.set_closed(true);
  } else {
    item.set_lost(why.message());
  }
  uplink_->Queue(std::move(item));
}

void ControlRelay::UplinkLost(const Status& why) {
  options_.logger->error("{}", why.message());
  wire::ControllerMessage abort;
  abort.mutable_abort()->set_reason(why.message());
  server_->Forward({}, abort.SerializeAsString());
}

}  // namespace kolo::transport
