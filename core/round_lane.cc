#include "core/round_lane.h"

#include <algorithm>

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
         a.diverted == b.diverted && a.eager == b.eager;
}

const uint8_t* RoundEager::Find(uint32_t id, size_t* bytes) const {
  const auto it = std::lower_bound(ids.begin(), ids.end(), id);
  if (it == ids.end() || *it != id) return nullptr;
  const auto index = static_cast<size_t>(it - ids.begin());
  size_t offset = 0;
  for (size_t i = 0; i < index; ++i) offset += sizes[i];
  *bytes = sizes[index];
  return data.data() + offset;
}

bool operator==(const RoundEager& a, const RoundEager& b) {
  return a.ids == b.ids && a.sizes == b.sizes && a.data == b.data;
}

}  // namespace kolo
