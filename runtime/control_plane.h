// ControlPlane: how this rank reaches the controller (DESIGN.md §3), and what it holds for that:
// the job's security; on rank 0 the controller itself, its gRPC server and the in-process
// channel to it (also the controller's outbox); on the other ranks a gRPC channel to rank 0. The
// start builds rank 0's parts (RuntimeStart::StartController) and hands them over; the runtime
// tears it down in the steps of RuntimeImpl::Teardown (Close, DropChannel, Reset).
//
// Threading: the runtime's owner (its start, StartTimeline and teardown, under its lifecycle
// lock after the start); NoteLostRank from ElasticStartWatch's thread during the start.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "core/autotuner.h"
#include "core/control_channel.h"
#include "core/logging.h"
#include "kolo/options.h"
#include "runtime/control_relays.h"
#include "transport/grpc/control_auth.h"
#include "transport/local/local_control_channel.h"

namespace kolo {

namespace controller {
class Controller;
}
namespace transport {
class ControlRelay;
class GrpcControlServer;
}  // namespace transport

// Rank 0's controller as RuntimeStart::StartController built it, started. Declared in the order
// they may be destroyed in reverse: the server before the controller, the controller before its
// outbox, the autotuner (read by the controller and the loop) last.
struct ControllerParts {
  ControllerParts();
  ControllerParts(ControllerParts&&) noexcept;
  ~ControllerParts();

  std::unique_ptr<Autotuner> autotuner;  // with KOLO_AUTOTUNE, else null
  std::unique_ptr<LocalControlChannel> channel;
  std::unique_ptr<controller::Controller> controller;
  std::unique_ptr<transport::GrpcControlServer> server;
  std::chrono::steady_clock::time_point started;  // when the server started
};

class ControlPlane {
 public:
  ControlPlane();
  ~ControlPlane();

  // The job's secret and TLS files (RuntimeStart::LoadSecurity): the server, the channel and the
  // data plane's handshake use them.
  void UseSecurity(transport::ControlSecurity security) { security_ = std::move(security); }
  const transport::ControlSecurity& security() const { return security_; }
  // Rank 0: its controller, started.
  void Adopt(ControllerParts parts);
  // The control relay this rank's process runs for its host (KOLO_CONTROL_RELAYS=host),
  // started; Close stops it after this rank's own channel.
  void AdoptRelay(std::unique_ptr<transport::ControlRelay> relay);
  // This rank's channel to the controller: rank 0's in-process one, else a gRPC channel to
  // `controller_address`, or to its host's relay where `relay` says so (KOLO_TIMEOUT_SECONDS
  // from `options`). `on_fatal` is told an abort at once, on the channel's reader thread
  // (ControlChannel::SetFatalHandler).
  ControlChannel* OpenChannel(const std::string& controller_address, const RelayPlan& relay,
                              const Options& options, const Logger& logger,
                              std::function<void(const Status&)> on_fatal);
  ControlChannel* channel() const { return channel_; }
  controller::Controller* controller() const { return controller_.get(); }  // rank 0, else null
  Autotuner* autotuner() const { return autotuner_.get(); }  // rank 0 with KOLO_AUTOTUNE
  // An elastic generation's rank 0: kolorun's driver reported `lost` (job rank `lost_rank`)
  // gone during the start; the controller aborts the start naming it.
  void NoteLostRank(const std::string& lost, int lost_rank);
  // Rank 0 after a failed start: while its controller aborted the job before every rank said
  // hello, keeps serving so that ranks still starting are refused with the abort's reason
  // (naming the rank that died) instead of retrying until their start timeout and blaming
  // rank 0; returns once every rank has heard it or the start timeout (from `options`) has
  // passed since the controller started.
  void TellLateRanks(const Options& options, const Logger& logger) const;

  // --- Teardown, in RuntimeImpl::Teardown's order. ---
  // Whether every rank sent its shutdown notice and got the job-wide Shutdown (rank 0).
  bool job_done() const;
  // Closes the channel, stops this process's relay and the server, flushing until `deadline`,
  // and the controller.
  void Close(std::chrono::steady_clock::time_point deadline);
  void DropChannel();  // after the loop and the data planes' executors are gone
  void Reset();        // the server, the controller, then its outbox

 private:
  transport::ControlSecurity security_;  // holds the key
  // Rank 0 only (ControllerParts), destroyed by Reset in this order: server_, controller_,
  // local_channel_; autotuner_ last (read by the controller and the loop, so it outlives both).
  std::unique_ptr<Autotuner> autotuner_;
  std::unique_ptr<LocalControlChannel> local_channel_;
  std::unique_ptr<controller::Controller> controller_;
  std::unique_ptr<transport::GrpcControlServer> server_;
  std::chrono::steady_clock::time_point controller_started_;
  // Rank 0 of an elastic generation: the member kolorun's driver reported lost during the start
  // (NoteLostRank); -1: none.
  std::atomic<int> elastic_lost_rank_{-1};
  // Ranks > 0: a gRPC channel to the controller or (RelayedChannel) to this host's relay.
  std::unique_ptr<ControlChannel> grpc_channel_;
  ControlChannel* channel_ = nullptr;  // local_channel_ or grpc_channel_, once open
  // KOLO_CONTROL_RELAYS=host, this host's local rank 0: its relay (after the channel in Close,
  // before the channel's end in Reset, so that members see it end last).
  std::unique_ptr<transport::ControlRelay> relay_;
};

}  // namespace kolo
