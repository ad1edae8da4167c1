// P2pLane: kolo's point-to-point ops (kolo/p2p.h, docs/P2P.md) on one rank: a connection to every
// peer (made with the data mesh, TcpMesh::TakeP2pConnections), the matching of sends and
// receives (p2p_matcher.h), and the protocol on each connection (p2p_frame.h):
//   small tensor (<= Config::eager_bytes):  OFFER+bytes -> ACK
//   larger, same host (single copy):       OFFER(address) -> the receiver reads the sender's
//                                           memory (process_vm_readv) -> ACK
//   larger otherwise:                      OFFER -> PULL -> DATA+bytes
// and REFUSE (a disagreement, both ends fail), CANCEL (the sender's timeout passed).
//
// With a same-host peer every message but DATA goes through the pair's shared-memory rings
// (p2p_ring.h, set up at Start), the socket carrying DATA, doorbells and the peer's end.
//
// Progress is made by whichever thread holds the lane's lock: a caller waiting for an op (Drive),
// which polls the rings (and the sockets now and then) without sleeping for its budget; the lane's
// own thread, which sleeps in poll() on them while ops are pending and no caller drives (it stands
// aside then: on a host whose cores are all taken its wake-up would take the driver's core); and
// Post, which writes at once. No controller and no other rank is involved.
//
// Threading: Post, Drive, Interrupt and Stop from any thread. Callbacks run on the lane's thread
// or on a thread in Drive (a caller waiting for an op runs what completes meanwhile, as kolo's
// blocking calls run their op's callback: no hand-off to another thread), never under the lock;
// those of requests with done_anywhere also at Post. Destroy after Stop, or let the destructor
// stop it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "core/mutex.h"
#include "core/spin_wait.h"
#include "core/trace_sink.h"
#include "kolo/status.h"
#include "transport/p2p/p2p_link.h"
#include "transport/p2p/p2p_matcher.h"
#include "transport/unique_fd.h"

struct pollfd;

namespace kolo::transport {

class P2pLane {
 public:
  struct Config {
    int rank = 0;
    int size = 1;
    // By rank: on this host, so an offer's bytes may be read from its memory directly.
    std::vector<bool> same_host;
    // Whether to offer (and try) that single copy at all (KOLO_TRANSPORT=tcp and
    // KOLO_SHM_SINGLE_COPY=off say no).
    bool single_copy = true;
    // Whether same-host pairs may carry their messages through shared-memory rings
    // (p2p_ring.h; KOLO_TRANSPORT=tcp says no), and how long Start waits for a peer to agree.
    bool rings = true;
    double start_timeout_seconds = 60;
    // Offers up to this size carry their bytes (one message, completed by the ACK).
    uint64_t eager_bytes = 64 << 10;
    Logger logger;               // null: a "p2p" logger at warning level
    TraceSink* trace = nullptr;  // the timeline; may be null
    // What a driving caller does between two polls (core/spin_wait.h): keep its core where every
    // rank of the host has one.
    BetweenPolls between_polls = BetweenPolls::kYield;
  };

  // Takes the connections (by rank; invalid at our own index) and starts the lane's thread.
  static StatusOr<std::unique_ptr<P2pLane>> Start(Config config, std::vector<UniqueFd> peers);
  ~P2pLane();
  P2pLane(const P2pLane&) = delete;
  P2pLane& operator=(const P2pLane&) = delete;

  // Takes `request` (filled in as p2p_request.h says): OK, and its callback runs once; or the
  // error (the peer is not connected or gone, the lane stopped or the job failed), and it never
  // runs. `caller_drives`: the caller calls Drive for it at once (a blocking op), so the lane's
  // thread is not woken for it.
  Status Post(std::shared_ptr<P2pRequest> request, bool caller_drives = false);
  // Makes progress on this thread until `done()` or `budget` (a PollBudget) passes; true once
  // `done()`.
  bool Drive(const std::function<bool()>& done, std::chrono::microseconds budget);
  // Whether any op is pending. Any thread (a relaxed read: a hint for whom to drive).
  bool busy() const { return activity_.pending.load(std::memory_order_relaxed) > 0; }
  // The job failed: every pending op fails with `why`, every later Post returns it. Any thread.
  void Interrupt(const Status& why);
  // Fails every pending op with `why`, runs their callbacks and joins the thread. Idempotent.
  void Stop(const Status& why);

 private:
  struct Finish {
    std::shared_ptr<P2pRequest> request;
    Status status;
  };
  P2pLane(Config config, std::vector<UniqueFd> peers, std::vector<std::unique_ptr<P2pRing>> rings,
          UniqueFd wake);

  // The lane's thread: polls the connections (only the wake-up fd while a caller drives), makes
  // progress, runs the callbacks.
  void Run();
  // One round of progress without sleeping: reads and writes what the connections allow, fails
  // what passed its deadline. Collects completions into finished_.
  void ServeLocked(const std::vector<pollfd>& polled) KOLO_REQUIRES(mu_);
  void PollSetLocked(bool sockets, std::vector<pollfd>* fds) KOLO_REQUIRES(mu_);
  // Runs the callbacks of `done` here (the lane's thread, a driver) or, those without
  // done_anywhere, hands them to the lane's thread (Post).
  void RunCallbacks(std::vector<Finish> done, bool here);
  void Wake();

  // p2p_protocol.cc: the messages.
  void SendOfferLocked(const std::shared_ptr<P2pRequest>& send) KOLO_REQUIRES(mu_);
  void PostRecvLocked(const std::shared_ptr<P2pRequest>& recv) KOLO_REQUIRES(mu_);
  void ReadLocked(P2pLink& link, P2pSource source) KOLO_REQUIRES(mu_);
  bool OnHeaderLocked(P2pLink& link) KOLO_REQUIRES(mu_);
  void OnPayloadLocked(P2pLink& link) KOLO_REQUIRES(mu_);
  void OnCancelLocked(P2pLink& link) KOLO_REQUIRES(mu_);
  void OnOfferLocked(P2pLink& link) KOLO_REQUIRES(mu_);
  // Meets `recv` with `offer` (its bytes here, to be read, or elsewhere): fills it, refuses it,
  // or asks for the bytes.
  void MatchLocked(const std::shared_ptr<P2pRequest>& recv, P2pLink& link, const P2pOffer& offer)
      KOLO_REQUIRES(mu_);
  void FailLocked(const std::shared_ptr<P2pRequest>& request, const Status& why) KOLO_REQUIRES(mu_);
  void CompleteLocked(const std::shared_ptr<P2pRequest>& request, const Status& status)
      KOLO_REQUIRES(mu_);
  void PeerGoneLocked(P2pLink& link) KOLO_REQUIRES(mu_);
  // Writes what `link` holds that its socket takes, completing the sends whose DATA left.
  void FlushLocked(P2pLink& link) KOLO_REQUIRES(mu_);
  void ExpireLocked(std::chrono::steady_clock::time_point now) KOLO_REQUIRES(mu_);
  void Trace(const P2pRequest& request, const Status& status) const;

  const Config config_;
  const UniqueFd wake_;  // eventfd: the thread re-reads what to poll
  std::thread thread_;
  // Who is working on the ops, readable without the lock.
  struct Activity {
    std::atomic<int> drivers{0};  // callers in Drive
    std::atomic<int> pending{0};  // pending_.size()
    // When the last Drive that did not finish its op returned (steady clock, ns): the ops
    // posted before it get no grace (Run).
    std::atomic<int64_t> gave_up_ns{0};
    // The lane's thread polls the connections (set before it sleeps, under the lock): a post
    // need not wake it.
    std::atomic<bool> watching{false};
  };
  Activity activity_;

  Mutex mu_;
  std::vector<std::unique_ptr<P2pLink>> links_ KOLO_GUARDED_BY(mu_);  // by rank; null: none
  P2pMatcher matcher_ KOLO_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<P2pRequest>> pending_ KOLO_GUARDED_BY(mu_);
  std::vector<Finish> finished_ KOLO_GUARDED_BY(mu_);  // completed, callbacks not yet run
  std::vector<Finish> deferred_ KOLO_GUARDED_BY(mu_);  // for the lane's thread to run
  Status fatal_ KOLO_GUARDED_BY(mu_);                  // Interrupt's or Stop's
  bool stopping_ KOLO_GUARDED_BY(mu_) = false;
};

}  // namespace kolo::transport
