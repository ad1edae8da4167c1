// RelayRoutes: the controller's side of its control relays' streams when it sends (ControlSessions'
// insides; docs/DESIGN-NOTES.md, "Control relays"). A relay's stream stands for several ranks; a
// message for some of them goes once, in a RelayDown envelope naming them (none named: every
// member of that relay), and a broadcast's envelope is encoded once for every relay that relays
// it to all of its members.
// Threading: none of its own; ControlSessions calls it under its lock.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "proto/kolo.pb.h"
#include "transport/grpc/control_session.h"

namespace kolo::transport {

class RelayRoutes {
 public:
  // The envelope of `inner` (a serialized ControllerMessage) for `ranks` (empty: every member).
  static Encoded Envelope(const std::vector<int>& ranks, const std::string& inner);

  // Members registered through `relay`, one more or one less.
  void Joined(ControlSession* relay) { ++members_[relay]; }
  void Left(ControlSession* relay);

  // One broadcast: Begin, Add each target rank that `relay` serves, then Deliver `message`
  // (queued on each relay's stream once); the drops, by rank, go to `dropped`.
  void Begin() { batch_.clear(); }
  void Add(ControlSession* relay, int rank);
  void Deliver(const wire::ControllerMessage& message,
               std::vector<std::pair<int, const char*>>* dropped);

 private:
  std::unordered_map<ControlSession*, int> members_;                 // relay -> registered ranks
  std::vector<std::pair<ControlSession*, std::vector<int>>> batch_;  // this broadcast's targets
};

}  // namespace kolo::transport
