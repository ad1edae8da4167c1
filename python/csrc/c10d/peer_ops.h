// PeerOps: the point-to-point side of one KoloBackend (kolo_backend.h). c10d's send, recv and
// recvAnysource become kolo's point-to-point ops (kolo/p2p.h) in the group's kolo process set,
// one KoloWork each, completing from kolo's callback; monitoredBarrier is built on them
// (peer_ops_barrier.cc); and the group's coalescing block (coalesced_work.h) is kept here.
// kolo matches point-to-point ops per pair, process set and tag, in FIFO order, without names,
// so they take no part in the group's OpNamer: a pair's traffic leaves the names of the group's
// collectives, and so the other ranks, alone.
//
// Threading: any thread; no lock is held across an op. The GIL is released around every
// enqueue and wait.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "python/csrc/c10d/coalesced_work.h"

namespace kolo::torch_ext {

class PeerOps {
 public:
  struct Group {
    int rank = 0;  // in the group
    int size = 1;
    int process_set = 0;         // kolo's process set of the group
    std::vector<int> set_ranks;  // the kolo set rank of each group rank (-1: not in the set)
    std::string name;            // torch's ("0" for the world)
  };
  explicit PeerOps(Group group);

  // c10d's send: `tensor` to group rank `dst` under c10d's `tag`; kolo fails it after `timeout`
  // if `dst` posts no matching receive.
  c10::intrusive_ptr<c10d::Work> Send(const at::Tensor& tensor, int dst, int tag,
                                      std::chrono::milliseconds timeout);
  // c10d's recv (`src` a group rank) and recvAnysource (`src` kolo::kAnySource); the work's
  // sourceRank() is the sender's group rank.
  c10::intrusive_ptr<c10d::Work> Recv(const at::Tensor& tensor, int src, int tag,
                                      std::chrono::milliseconds timeout);
  // c10d's monitoredBarrier (peer_ops_barrier.cc), as gloo's: every rank tells rank 0 it
  // arrived, rank 0 waits at most `timeout` for each and answers every rank; it raises naming
  // the first rank that did not arrive (every such rank with `wait_all_ranks`), and so do the
  // ranks that did, naming rank 0's finding.
  void MonitoredBarrier(std::chrono::milliseconds timeout, bool wait_all_ranks);

  Coalescer& coalescer() { return coalescer_; }

 private:
  // Send or Recv, once the peer and the tag are checked; `peer` a group rank or kAnySource.
  c10::intrusive_ptr<c10d::Work> Post(bool send, const at::Tensor& tensor, int peer, int tag,
                                      std::chrono::milliseconds timeout);
  // Throws unless `peer` is another rank of the group (`role`: "destination" or "source").
  void CheckPeer(int peer, const char* op, const char* role) const;
  // monitoredBarrier's halves (peer_ops_barrier.cc), in the group's set; `round` numbers the
  // group's monitored barriers (the same count on every rank: it picks their kolo tags).
  void ArriveAtRoot(int64_t round, std::chrono::milliseconds timeout);
  void GatherAtRoot(int64_t round, std::chrono::milliseconds timeout, bool wait_all_ranks);

  const Group group_;
  std::vector<int> group_of_set_;  // constant: the group rank of each set rank (-1: none)
  std::atomic<int64_t> barrier_rounds_{0};
  Coalescer coalescer_;
};

}  // namespace kolo::torch_ext
