// Rendezvous: admits the Hello of each rank (range, job size, duplicates) and builds
// the peer table that the Welcome carries once all ranks are in. Owned by the Controller and
// called under its lock; tests drive it directly. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/messages.h"
#include "kolo/status.h"

namespace kolo::controller {

class Rendezvous {
 public:
  // Hellos reach it authenticated: the transport admits a stream only after its HMAC
  // challenge-response over the job secret (docs/SECURITY.md), so there is no token to compare.
  explicit Rendezvous(int size);

  // Admits `hello` or says why not (InvalidArgument naming the rank); a refusal changes
  // nothing, so the job is unaffected by a stray or misconfigured worker.
  Status Admit(const Hello& hello);

  bool admitted(int rank) const { return rank >= 0 && rank < size_ && admitted_[rank]; }
  bool complete() const { return num_admitted_ == size_; }
  // Indexed by rank; entries of ranks not yet admitted have rank -1.
  const std::vector<PeerInfo>& peers() const { return peers_; }

 private:
  const int size_;
  std::vector<bool> admitted_;
  std::vector<PeerInfo> peers_;
  int num_admitted_ = 0;
};

}  // namespace kolo::controller
