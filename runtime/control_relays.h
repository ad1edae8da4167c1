// Control relays for a job's ranks (KOLO_CONTROL_RELAYS=host; docs/DESIGN-NOTES.md, "Control
// relays"). Before a rank joins, PlanControlRelay decides from what every rank of its host
// already knows (its rank, KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE, the controller address and the job
// id) where its control stream goes: on every host but rank 0's, to the relay that the host's
// first rank (local rank 0) runs for the host's ranks, which must be consecutive. The relay
// listens on a Unix-domain socket in the abstract namespace whose name derives from the job and
// that first rank, so that no launcher channel hands out its address; members that come before
// it retry until the start deadline (GrpcControlChannel::Connect). RelayedChannel names the
// relay in every error of a member's stream.
//
// Threading: PlanControlRelay and StartHostRelay are pure steps of the start (the runtime's
// owner); RelayedChannel has the threading of the channel it wraps.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/control_channel.h"
#include "core/logging.h"
#include "kolo/options.h"
#include "transport/grpc/control_auth.h"
#include "transport/grpc/control_relay.h"

namespace kolo {

struct RelayPlan {
  bool relayed = false;      // this rank's control stream goes to its host's relay
  bool hosts_relay = false;  // this rank's process runs that relay
  int host_rank = -1;        // the relay's rank: the host's first
  int members = 0;           // ranks host_rank .. host_rank + members - 1
  std::string address;       // "unix-abstract:kolo-<job>-control-relay-of-rank-<host_rank>"
  // KOLO_CONTROL_RELAYS=host, yet this rank connects directly: why (one line at init). Empty
  // with "off", on rank 0's host, and on a host of one rank (nothing to gather).
  std::string direct_reason;

  // "the control relay run by rank 2 (KOLO_CONTROL_RELAYS=host) at unix-abstract:..."
  std::string Describe() const;
};

// Where this rank's control stream goes; `controller_address` as every rank > 0 knows it.
RelayPlan PlanControlRelay(const Options& options, const std::string& controller_address);

// The relay `plan` says this process runs, listening and connected to the controller by
// `deadline`.
StatusOr<std::unique_ptr<transport::ControlRelay>> StartHostRelay(
    const Options& options, const RelayPlan& plan, const std::string& controller_address,
    const transport::ControlSecurity& security, std::chrono::steady_clock::time_point deadline,
    const Logger& logger);

// A member's channel to its relay: every failure it reports names the relay (`plan`), so that a
// relay's process that died is named, not "the controller". Forwards everything else.
class RelayedChannel final : public ControlChannel {
 public:
  RelayedChannel(std::unique_ptr<ControlChannel> channel, const RelayPlan& plan);

  StatusOr<std::vector<PeerInfo>> Connect(const Hello& hello,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::function<void()> wake) override;
  void SetFatalHandler(std::function<void(const Status&)> on_fatal) override;
  Status Send(const WorkerMessage& message) override;
  StatusOr<std::optional<ControllerMessage>> TryReceive() override;
  void Close(std::chrono::steady_clock::time_point deadline) override;
  std::string generation() const override;

 private:
  Status Named(const Status& error) const;

  const std::unique_ptr<ControlChannel> channel_;
  const std::string relay_;  // RelayPlan::Describe
  const int host_rank_;
  const bool first_hop_;  // the relay's own process: its relay is never missing at the start
};

}  // namespace kolo
