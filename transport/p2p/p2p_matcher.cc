#include "transport/p2p/p2p_matcher.h"

#include <algorithm>

namespace kolo::transport {

int CallerRankOf(const P2pRequest& request, int job_rank) {
  if (request.members.empty()) return job_rank;
  auto it = std::lower_bound(request.members.begin(), request.members.end(), job_rank);
  if (it == request.members.end() || *it != job_rank) return -1;
  return static_cast<int>(it - request.members.begin());
}

bool Accepts(const P2pRequest& recv, int peer, int set, int64_t tag) {
  if (recv.is_send || recv.set != set || recv.tag != tag) return false;
  if (recv.peer >= 0) return recv.peer == peer;
  return CallerRankOf(recv, peer) >= 0;
}

std::shared_ptr<P2pRequest> P2pMatcher::TakeRecvFor(int peer, int set, int64_t tag) {
  for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
    if (Accepts(**it, peer, set, tag)) {
      std::shared_ptr<P2pRequest> recv = std::move(*it);
      recvs_.erase(it);
      return recv;
    }
  }
  return nullptr;
}

std::optional<P2pOffer> P2pMatcher::TakeOfferFor(const P2pRequest& recv) {
  for (auto it = offers_.begin(); it != offers_.end(); ++it) {
    if (Accepts(recv, it->peer, it->frame.set, it->frame.tag)) {
      P2pOffer offer = std::move(*it);
      offers_.erase(it);
      return offer;
    }
  }
  return std::nullopt;
}

void P2pMatcher::AddOffer(P2pOffer offer) {
  offer.arrival = next_arrival_++;
  offers_.push_back(std::move(offer));
}

bool P2pMatcher::RemoveRecv(const P2pRequest* recv) {
  auto it = std::find_if(recvs_.begin(), recvs_.end(),
                         [recv](const std::shared_ptr<P2pRequest>& r) { return r.get() == recv; });
  if (it == recvs_.end()) return false;
  recvs_.erase(it);
  return true;
}

bool P2pMatcher::RemoveOffer(int peer, uint64_t seq) {
  auto it = std::find_if(offers_.begin(), offers_.end(),
                         [&](const P2pOffer& o) { return o.peer == peer && o.frame.seq == seq; });
  if (it == offers_.end()) return false;
  offers_.erase(it);
  return true;
}

std::vector<std::shared_ptr<P2pRequest>> P2pMatcher::PeerGone(int peer,
                                                              const std::vector<bool>& alive) {
  offers_.erase(std::remove_if(offers_.begin(), offers_.end(),
                               [peer](const P2pOffer& o) {
                                 return o.peer == peer && (o.frame.flags & kP2pInline) == 0;
                               }),
                offers_.end());
  std::vector<std::shared_ptr<P2pRequest>> orphans;
  for (auto it = recvs_.begin(); it != recvs_.end();) {
    const P2pRequest& recv = **it;
    bool hopeless = recv.peer == peer;
    if (recv.peer < 0) {  // from any member: hopeless once none is alive
      hopeless = true;
      for (size_t rank = 0; rank < alive.size(); ++rank) {
        if (alive[rank] && CallerRankOf(recv, static_cast<int>(rank)) >= 0) hopeless = false;
      }
    }
    if (hopeless) {
      orphans.push_back(std::move(*it));
      it = recvs_.erase(it);
    } else {
      ++it;
    }
  }
  return orphans;
}

}  // namespace kolo::transport
