#include "core/round_lane.h"

#include <algorithm>
#include <cstring>

namespace kolo {

RoundPattern RoundPatternFor(int size) {
  return size <= kAllToAllMaxRanks ? RoundPattern::kAllToAll : RoundPattern::kDissemination;
}

int RoundSteps(int size) {
  int steps = 0;
  while (steps < 31 && (int64_t{1} << steps) < size) ++steps;
  return steps;
}

int RoundSendPeer(int rank, int size, int step) {
  return static_cast<int>((int64_t{rank} + (int64_t{1} << step)) % size);
}

int RoundReceivePeer(int rank, int size, int step) {
  const int64_t back = (int64_t{1} << step) % size;
  return static_cast<int>((int64_t{rank} - back + size) % size);
}

std::vector<int> RoundPeersOf(int rank, int size) {
  std::vector<int> peers;
  if (RoundPatternFor(size) == RoundPattern::kAllToAll) {
    for (int r = 0; r < size; ++r) {
      if (r != rank) peers.push_back(r);
    }
    return peers;
  }
  for (int s = 0; s < RoundSteps(size); ++s) {
    peers.push_back(RoundSendPeer(rank, size, s));
    peers.push_back(RoundReceivePeer(rank, size, s));
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  peers.erase(std::remove(peers.begin(), peers.end(), rank), peers.end());
  return peers;
}

bool operator==(const RoundMessage& a, const RoundMessage& b) {
  return a.round == b.round && a.step == b.step && a.notice == b.notice &&
         a.received_seq == b.received_seq && a.joined == b.joined && a.stopping == b.stopping &&
         a.fusion_threshold == b.fusion_threshold &&
         a.hierarchy_min_bytes == b.hierarchy_min_bytes && a.ready == b.ready &&
         a.diverted == b.diverted && a.eager == b.eager && a.staged == b.staged;
}

RoundEager& RoundEager::operator=(const RoundEager& other) {
  if (this == &other) return *this;
  owned = other.owned;
  inputs = other.inputs;
  const uint8_t* from = other.owned.data();
  for (Input& input : inputs) {
    if (!other.owned.empty() && input.data >= from && input.data < from + other.owned.size()) {
      input.data = owned.data() + (input.data - from);
    }
  }
  return *this;
}

const RoundEager::Input* RoundEager::Find(uint32_t id) const {
  const auto it =
      std::lower_bound(inputs.begin(), inputs.end(), id,
                       [](const Input& input, uint32_t want) { return input.id < want; });
  return it == inputs.end() || it->id != id ? nullptr : &*it;
}

bool operator==(const RoundEager& a, const RoundEager& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const RoundEager::Input& x = a.inputs[i];
    const RoundEager::Input& y = b.inputs[i];
    if (x.id != y.id || x.bytes != y.bytes ||
        (x.bytes != 0 && std::memcmp(x.data, y.data, x.bytes) != 0)) {
      return false;
    }
  }
  return true;
}

}  // namespace kolo
