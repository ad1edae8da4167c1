// FrontDoor: kolo's own listener for rank 0's controller port when the control plane is
// plaintext (docs/SECURITY.md, "Connections that are not control streams"). gRPC 1.51's
// listener stops accepting for good after one accept4() EMFILE and caps nothing, so kolo
// accepts instead: a connection stays here until the 24-byte HTTP/2 client preface has
// arrived, then it is handed to the gRPC server (grpc::AddInsecureChannelFromFd). Anything
// else is closed with a rate-limited log line naming the peer and the reason: an HTTP/1
// request, a TLS hello, other bytes, or silence past the preface timeout. At most
// max(kMaxPending, the job's size) connections wait for their preface; a new one past that
// drops the oldest (unless its preface has just arrived: then it is handed over). An accept that
// fails for want of descriptors (EMFILE, ENFILE) is logged, rate-limited, and retried every
// kAcceptRetry until descriptors are free: the door never stops accepting. With TLS the gRPC server
// keeps its own listener: gRPC 1.51 can adopt a descriptor only as a plaintext channel
// (AddInsecureChannelFromFd has no credentials argument).
//
// Threading: one accept thread, started by Start and joined by Stop, owns the listeners and
// the waiting connections and calls the hand-off; it never blocks on one connection (poll with
// the nearest deadline; Stop wakes it through an eventfd). PeerName may be called from any
// thread. Start, Stop and the destructor: from the owner's thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "core/mutex.h"
#include "kolo/status.h"
#include "transport/auth/refusal_log.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

class FrontDoor {
 public:
  // Connections that may wait for their preface at once in a job of up to this many ranks;
  // each holds one descriptor. A larger job's ranks all connect at start: its cap is its size,
  // so that its own burst is never cut (a dropped rank reconnects after gRPC's backoff).
  static constexpr size_t kMaxPending = 64;
  // How long the door waits after an accept failed for want of descriptors.
  static constexpr std::chrono::milliseconds kAcceptRetry{100};

  // Takes a connected socket (non-blocking, its preface unread) and owns it from then on.
  using Handoff = std::function<void(int fd)>;

  // Binds and listens on `address` ("host:port"; port 0 picks one); accepts nothing before
  // Start. A connection that has not sent the whole preface `preface_timeout_seconds` after
  // it was accepted is closed. `job_size`: the job's ranks (see kMaxPending). Fails in one
  // sentence when the address cannot be bound.
  static StatusOr<std::unique_ptr<FrontDoor>> Listen(const std::string& address,
                                                     double preface_timeout_seconds, int job_size,
                                                     Logger logger);
  ~FrontDoor();  // Stop()
  FrontDoor(const FrontDoor&) = delete;
  FrontDoor& operator=(const FrontDoor&) = delete;

  int port() const { return port_; }

  // Starts the accept thread; `handoff` runs on it for every connection that sent the preface.
  void Start(Handoff handoff);
  // Stops accepting, closes the waiting connections and the listeners, joins the accept
  // thread (it wakes at once). Connections already handed off are the server's. Idempotent.
  void Stop();

  // The peer address ("ipv4:127.0.0.1:41234") of a connection handed off as descriptor N, for
  // the gRPC peer string "fd:N" that gRPC gives such a connection; any other string is
  // returned unchanged. A descriptor number is reused once gRPC closes it, so a name asked for
  // after its connection closed may be a newer connection's.
  std::string PeerName(const std::string& grpc_peer) const;

 private:
  struct Waiting {
    UniqueFd fd;
    std::string peer;
    std::chrono::steady_clock::time_point deadline;
    bool low_water_set = false;  // SO_RCVLOWAT raised to the preface length
    bool done = false;           // handed off or closed; removed after this pass
  };

  FrontDoor(std::vector<UniqueFd> listeners, int port, UniqueFd wake, double preface_timeout,
            size_t max_pending, Logger logger);
  void Run();
  void AcceptFrom(int listener);
  void Admit(UniqueFd fd, std::string peer);
  // Peeks at what `waiting` sent; hands it off, refuses it, or leaves it waiting.
  void Inspect(Waiting& waiting, bool hung_up);
  void Expire(Waiting& waiting);
  void Refuse(Waiting& waiting, const std::string& key, const std::string& reason);
  void HandOff(Waiting& waiting);
  void LogAcceptFailure(int error);

  // Constant after construction.
  const int port_;
  const double preface_timeout_;
  const size_t max_pending_;  // see kMaxPending
  const Logger logger_;
  const UniqueFd wake_;  // eventfd: Stop writes, the accept thread wakes
  Handoff handoff_;      // set by Start before the thread starts
  RefusalLog refusals_;  // thread-safe

  // Accept thread only (after Start; before it, and after Stop has joined it, the owner's).
  std::vector<UniqueFd> listeners_;
  std::vector<Waiting> waiting_;  // oldest first
  std::chrono::steady_clock::time_point accept_resume_{};
  std::chrono::steady_clock::time_point accept_failure_logged_{};
  long accept_failures_unlogged_ = 0;

  std::thread thread_;  // owner's thread: started by Start, joined by Stop

  mutable Mutex peers_mu_;
  std::map<int, std::string> peers_ KOLO_GUARDED_BY(peers_mu_);  // handed-off fd -> peer
};

}  // namespace kolo::transport
