// MeshConnector: builds the data mesh's connections for TcpMesh::Connect. Each rank dials every
// lower rank (retrying until the deadline) and accepts every higher rank on its listener; each
// connection runs the mutual HMAC handshake of transport/tcp/mesh_handshake.h. An inbound
// connection claims its rank only once its proof checks out. Everything happens in one poll() loop
// on the calling thread, so a silent or hostile connection delays nobody. Threading:
// single-threaded; Run() is called once by the thread that owns the listener.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/logging.h"
#include "kolo/status.h"
#include "transport/auth/refusal_log.h"
#include "transport/deadline.h"
#include "transport/tcp/mesh_handshake.h"
#include "transport/tcp/tcp_socket.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

class MeshConnector {
 public:
  struct Params {
    int rank = 0;
    int size = 1;
    MeshAuth auth;
    int listen_fd = -1;                        // non-blocking listener; not owned
    int interrupt_fd = -1;                     // readable once the mesh is interrupted; not owned
    std::function<Status()> interrupt_status;  // the status to return when it is readable
    double handshake_timeout_seconds = 30;     // per connection attempt
    Logger logger;
    // The ranks to connect to, ascending (the fast path's round connections connect only the
    // peers of the round pattern); empty: every other rank. Both ends of a pair must agree.
    std::vector<int> only;
    // A lazy mesh's pass (TcpMesh::Config::lazy): inbound connections from ranks outside `only`
    // are admitted too and returned with the wanted ones (their exchange with us comes later),
    // instead of being refused. Run() still returns once the wanted ones are up. A wrong answer
    // to our dial is retried (see OnAccept) rather than failing the pass at once.
    bool accept_others = false;
    // By rank (empty: none): ranks connected by an earlier pass; a dial from one of them is
    // refused as a duplicate.
    std::vector<bool> already_connected;
    // A lazy mesh's Connect: dials from ranks outside `only`, and second dials from ranks
    // already connected, are expected (a peer that finished its own start dials its round
    // connections, or a first-use connection, before this rank is ready for them; it retries),
    // so they are refused with a debug line, not a warning.
    bool outside_dials_expected = false;
  };
  // `peers[j]` is where rank j listens; only the ranks below ours are dialled.
  MeshConnector(Params params, std::vector<SocketAddress> peers);
  ~MeshConnector();

  // Blocks until every wanted peer is connected and handshaken, the deadline passes, or the mesh
  // is interrupted. Returns one socket per rank (invalid at our own index and at the ranks not
  // connected by this pass). Connections that are refused are logged and closed; they do not fail
  // the mesh.
  StatusOr<std::vector<UniqueFd>> Run(SteadyTime deadline);

 private:
  struct Pending;
  enum class StepOutcome { kContinue, kDone, kFailed, kFatal };
  struct StepResult {
    StepOutcome outcome = StepOutcome::kContinue;
    std::string error;
    // A dial this run does not connect: from a rank outside its set (see OnDial), or a second
    // one from a rank it connected (a lazy mesh's first-use dial during the round lane's pass).
    bool outside_set = false;
  };
  struct Dial {  // one per lower rank
    SteadyTime retry_at;
    std::chrono::milliseconds backoff{20};
    bool in_flight = false;
    std::string last_error = "no attempt finished yet";
  };

  void StartDials(SteadyTime now, SteadyTime deadline);
  Status AcceptAll(SteadyTime now, SteadyTime deadline);
  int PollTimeout(SteadyTime now, SteadyTime deadline) const;
  StepResult Step(Pending& p, short revents);
  StepResult Flush(Pending& p);
  StepResult ReadFrame(Pending& p);
  StepResult OnFrame(Pending& p);
  StepResult OnAccept(Pending& p);
  StepResult OnDial(Pending& p);
  StepResult OnProof(Pending& p);
  void Finish(Pending& p, const StepResult& result, SteadyTime now);
  Status TimeoutStatus() const;
  int wanted_connected_count() const;
  bool AwaitingProof() const;

  // Constant after construction.
  const Params params_;
  const std::vector<SocketAddress> peers_;
  // Run()'s thread only.
  std::vector<bool> wanted_;  // by rank: Params::only (or every other)
  int wanted_count_ = 0;
  std::vector<Dial> dials_;                        // indexed by rank; used below params_.rank
  std::vector<bool> claimed_;                      // a connection for this rank is admitted
  std::vector<UniqueFd> connected_;                // handshaken sockets, by rank
  std::vector<std::unique_ptr<Pending>> pending_;  // connections mid-handshake
  RefusalLog refusals_;                            // thread-safe
};

}  // namespace kolo::transport
