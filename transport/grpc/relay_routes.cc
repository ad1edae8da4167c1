#include "transport/grpc/relay_routes.h"

#include <algorithm>
#include <memory>

#include "transport/grpc/control_sessions.h"

namespace kolo::transport {

Encoded RelayRoutes::Envelope(const std::vector<int>& ranks, const std::string& inner) {
  wire::ControllerMessage envelope;
  wire::RelayDown* down = envelope.mutable_relayed();
  for (int rank : ranks) down->add_ranks(rank);
  down->set_message(inner);
  return ControlSessions::Encode(envelope);
}

void RelayRoutes::Left(ControlSession* relay) {
  auto it = members_.find(relay);
  if (it != members_.end() && --it->second <= 0) members_.erase(it);
}

void RelayRoutes::Add(ControlSession* relay, int rank) {
  // A relay's members are usually consecutive targets: the last entry first.
  if (batch_.empty() || batch_.back().first != relay) {
    auto it = batch_.begin();
    while (it != batch_.end() && it->first != relay) ++it;
    if (it == batch_.end()) {
      batch_.emplace_back(relay, std::vector<int>{});
    } else {
      std::rotate(it, it + 1, batch_.end());  // keep the found entry last
    }
  }
  batch_.back().second.push_back(rank);
}

void RelayRoutes::Deliver(const wire::ControllerMessage& message,
                          std::vector<std::pair<int, const char*>>* dropped) {
  if (batch_.empty()) return;
  const std::string inner = message.SerializeAsString();
  Encoded to_all;  // one encoding for every relay that gets it for all its members
  for (auto& [relay, ranks] : batch_) {
    auto it = members_.find(relay);
    const bool all = it != members_.end() && it->second == static_cast<int>(ranks.size());
    if (all && to_all == nullptr) to_all = Envelope({}, inner);
    const char* because = relay->Enqueue(all ? to_all : Envelope(ranks, inner));
    if (because == nullptr) continue;
    for (int rank : ranks) dropped->emplace_back(rank, because);
  }
  batch_.clear();
}

}  // namespace kolo::transport
