#include "core/control_channel.h"

#include <utility>

namespace kolo {

StatusOr<std::vector<PeerInfo>> PeersFromFirstMessage(ControllerMessage first,
                                                      const std::string& controller, int rank) {
  switch (first.kind) {
    case ControllerMessage::Kind::kWelcome:
      return std::move(first.peers);
    case ControllerMessage::Kind::kAbort:
      return Aborted(controller + " refused rank " + std::to_string(rank) + ": " + first.reason);
    default:
      return Internal(controller + " sent rank " + std::to_string(rank) +
                      " another message before its Welcome");
  }
}

}  // namespace kolo
