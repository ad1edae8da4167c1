#include "core/subset_data_plane.h"

#include <algorithm>
#include <utility>

namespace kolo {

SubsetDataPlane::SubsetDataPlane(DataPlane& base, std::vector<int> ranks)
    : base_(base), ranks_(std::move(ranks)) {
  auto me = std::find(ranks_.begin(), ranks_.end(), base_.rank());
  if (me != ranks_.end()) rank_ = static_cast<int>(me - ranks_.begin());
}

Status SubsetDataPlane::Exchange(int send_to, int recv_from, StreamExchange& exchange,
                                 const std::string& what) {
  auto base_rank = [this](int r) -> int {
    return r < 0 || r >= static_cast<int>(ranks_.size()) ? -1 : ranks_[static_cast<size_t>(r)];
  };
  if (rank_ < 0 || (send_to >= 0 && base_rank(send_to) < 0) ||
      (recv_from >= 0 && base_rank(recv_from) < 0)) {
    return Internal(what + ": exchange with ranks " + std::to_string(send_to) + " and " +
                    std::to_string(recv_from) + " outside a process set of " +
                    std::to_string(ranks_.size()) + " ranks");
  }
  return base_.Exchange(send_to < 0 ? -1 : base_rank(send_to),
                        recv_from < 0 ? -1 : base_rank(recv_from), exchange, what);
}

}  // namespace kolo
