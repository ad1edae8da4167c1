// RelayIntake: the controller's side of one control relay's stream, on receipt (ControlSession's
// insides for a stream whose Hello said `relay`; docs/DESIGN-NOTES.md, "Control relays"). Each
// RelayBatch holds members' messages in the order the relay read them: a member's Hello admits
// it under its rank with the relay's session (ControlSessions::RegisterRelayed) and goes to the
// handler as if it came on its own stream; its other messages and the end of its stream follow.
// The relay's stream ending loses every member still admitted, with a reason naming the relay.
// Threading: the relay session's read reactions only (one at a time), and its Complete.
#pragma once

#include <string>
#include <vector>

#include "core/messages.h"
#include "kolo/status.h"
#include "proto/kolo.pb.h"

namespace kolo::transport {

class ControlSession;
class ControlSessions;

class RelayIntake {
 public:
  RelayIntake(ControlSessions* sessions, ControlSession* relay)
      : sessions_(sessions), relay_(relay) {}

  // "hosted by rank R at host:port", for messages; set at admission.
  void set_name(std::string name) { name_ = std::move(name); }
  const std::string& name() const { return name_; }

  // Hands every item of `batch` to the handler; an item of a rank that is not a member (one
  // refused, or already ended) is dropped. An error (a malformed message, a Hello under another
  // rank) ends the relay's stream.
  Status Take(const wire::RelayBatch& batch);
  // The relay's stream ended (`why`): each member still admitted is lost.
  void LoseAll(const Status& why);

 private:
  Status TakeHello(int rank, const wire::WorkerMessage& message);
  // Tells one member it is refused (an Abort on the relay's stream, for it alone).
  void Refuse(int rank, const std::string& reason);
  // Whether `rank` was a member; it is not any more.
  bool Drop(int rank);

  ControlSessions* const sessions_;
  ControlSession* const relay_;
  std::string name_;
  std::vector<int> members_;  // admitted through this relay
  WorkerMessage scratch_;     // FromWire's, reused
};

}  // namespace kolo::transport
