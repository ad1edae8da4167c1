// P2pMatcher: the lane's matching tables (docs/P2P.md, "Matching"): the receives posted and not
// yet matched, in posting order, and the offers that arrived before any receive took them, in
// arrival order. An offer meets the first posted receive that accepts it; a receive the first
// offer it accepts. Per pair and tag the order is FIFO because a pair's offers arrive in order on
// one connection. Not thread-safe: the lane's lock guards it.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "transport/p2p/p2p_request.h"

namespace kolo::transport {

class P2pMatcher {
 public:
  // The first posted receive that takes an offer from `peer` with (`set`, `tag`), removed; or
  // null.
  std::shared_ptr<P2pRequest> TakeRecvFor(int peer, int set, int64_t tag);
  // The earliest waiting offer `recv` accepts, removed; or nothing.
  std::optional<P2pOffer> TakeOfferFor(const P2pRequest& recv);
  void AddRecv(std::shared_ptr<P2pRequest> recv) { recvs_.push_back(std::move(recv)); }
  // Stamps its arrival order.
  void AddOffer(P2pOffer offer);
  // Removes a posted receive (its deadline passed); false if it is not posted any more.
  bool RemoveRecv(const P2pRequest* recv);
  // Removes `peer`'s waiting offer `seq` (its sender cancelled it); false if none.
  bool RemoveOffer(int peer, uint64_t seq);
  // `peer` is gone: its waiting offers whose bytes are not here are dropped (nobody can fetch
  // them), and the posted receives that only it could satisfy are returned, removed.
  std::vector<std::shared_ptr<P2pRequest>> PeerGone(int peer, const std::vector<bool>& alive);

 private:
  std::deque<std::shared_ptr<P2pRequest>> recvs_;
  std::deque<P2pOffer> offers_;
  uint64_t next_arrival_ = 0;
};

}  // namespace kolo::transport
