#include "core/round_lane.h"

namespace kolo {

bool operator==(const RoundMessage& a, const RoundMessage& b) {
  return a.round == b.round && a.received_seq == b.received_seq && a.joined == b.joined &&
         a.stopping == b.stopping && a.fusion_threshold == b.fusion_threshold &&
         a.ready == b.ready && a.diverted == b.diverted;
}

}  // namespace kolo
