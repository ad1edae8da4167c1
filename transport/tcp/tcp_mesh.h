// TcpMesh: the CPU data plane (DESIGN.md §3). TCP connections, one per rank pair, used
// full-duplex: a full mesh made at Connect, or (Config::lazy) the ring neighbours at Connect and
// every other pair on its first Exchange (docs/SCALE.md, "Lazy data connections"); each connection
// is authenticated by a mutual HMAC handshake bound to the job secret, the job id, the mesh
// generation and both ranks (transport/tcp/mesh_handshake.h). Created and driven by the runtime's
// background thread; ops/ runs collectives on it through the DataPlane interface. Threading:
// Listen, Connect and Exchange run on one thread (the owner's); Interrupt and the accessors may be
// called from any thread. Destroy only when no Exchange is running.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "core/data_plane.h"
#include "core/logging.h"
#include "core/mutex.h"
#include "kolo/status.h"
#include "transport/tcp/mesh_connector.h"
#include "transport/tcp/mesh_handshake.h"
#include "transport/tcp/tcp_socket.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

class TcpMesh final : public DataPlane {
 public:
  struct Config {
    int rank = 0;
    int size = 1;
    // Interface to listen on; "0.0.0.0" (or "::") listens on all of them, and then
    // advertise_host must say which address peers connect to.
    std::string bind_host = "127.0.0.1";
    // Host peers use to reach this rank; empty: bind_host.
    std::string advertise_host;
    // The job's key and id, and the generation (the controller's Welcome says which);
    // connections that cannot prove the same are refused.
    MeshAuth auth;
    // KOLO_TIMEOUT_SECONDS: the longest an Exchange waits with no byte moving, and the longest
    // one connection may take to handshake.
    double timeout_seconds = DefaultOptions().timeout_seconds;
    Logger logger;  // null: a "transport" logger at warning level
    // Also connect a second set of connections for the fast path's rounds
    // (TakeRoundConnections): one per pair of ranks that exchange round messages under the
    // job's round pattern (core/round_lane.h, RoundPeersOf: every pair up to
    // kAllToAllMaxRanks ranks, O(log size) a rank beyond). Their handshakes bind the generation
    // with "/rounds" appended, so a data connection can never pass for one of them. Every rank
    // must agree. (The data connections are not affected.)
    bool round_lane = false;
    // Also connect one connection per pair of ranks for point-to-point (TakeP2pConnections,
    // transport/p2p/p2p_lane.h), every pair, at Connect; handshakes bind the generation with
    // "/p2p" appended. Every rank must agree (KOLO_P2P).
    bool p2p_lane = false;
    // Connect makes only the data connections to the ring neighbours (rank ± 1); an Exchange
    // with any other peer first connects to it (the peer does the same in its own exchange with
    // us), accepting meanwhile the connections other peers make to us. The listener stays open.
    // Every rank must agree. false: a full mesh at Connect, the listener closed after it (the
    // behaviour before lazy connections; kept for tests and as a fallback).
    bool lazy = true;
    // KOLO_TRANSPORT: not used by the mesh, but every rank must agree on it, and Connect
    // fails at once, naming both settings, when a peer's differs.
    Transport transport = Transport::kAuto;
  };

  // Binds bind_host on a free port and starts listening. Does not block on the network.
  static StatusOr<std::unique_ptr<TcpMesh>> Listen(const Config& config);
  ~TcpMesh() override;

  // Sets the generation the handshake binds (the controller's Welcome carries it). Call before
  // Connect, on the owner's thread.
  void SetGeneration(std::string generation) { generation_ = std::move(generation); }

  // How many ranks of the job compete for how many CPUs with this one (the runtime passes its
  // host's ranks and its own CPUs), and whether a launcher bound each rank to CPUs of its own
  // (KOLO_CPU_BIND=core). The pump polls without sleeping before it blocks
  // (transport/tcp/stream_pump.h) only when the ranks are bound so, or do not outnumber those
  // cores: beyond that a spinning rank takes the core from one that has work. Until it is called
  // the mesh does not busy-poll. Owner thread, not during an Exchange.
  void SetCoreShare(int ranks, int cores, bool bound_to_own_cpus = false);

  // Whether SetCoreShare found a core for every rank sharing them. Owner thread.
  bool busy_poll() const { return busy_poll_; }

  // "ip:port" (or "host:port") that peers connect to.
  std::string listen_address() const { return listen_address_; }

  // Connects to every other rank (`addresses` indexed by rank, each one's listen_address()):
  // dials the lower ranks and accepts the higher ones, handshaking each. Blocks until all are
  // up (OK), `deadline` passes (DeadlineExceeded naming the missing ranks), or Interrupt.
  // Foreign or malformed connections are refused, logged and closed without failing. Closes
  // the listener on success (config.lazy: connects the ring neighbours only and keeps it open).
  // Call once. With config.round_lane, then connects the round
  // connections the same way on the same listener (no second port to open).
  Status Connect(const std::vector<std::string>& addresses,
                 std::chrono::steady_clock::time_point deadline);

  // The round connections by rank (invalid at our own index and at ranks outside
  // RoundPeersOf), once: empty before a successful Connect, without config.round_lane, and on a
  // second call.
  std::vector<UniqueFd> TakeRoundConnections() { return std::move(round_peers_); }
  // The point-to-point connections by rank (config.p2p_lane), once, as TakeRoundConnections.
  std::vector<UniqueFd> TakeP2pConnections() { return std::move(p2p_peers_); }

  // How many peers this rank has a data connection to (config.lazy: grows on first use).
  // Owner thread.
  int connected_peers() const;

  int rank() const override { return config_.rank; }
  int size() const override { return config_.size; }
  // See DataPlane::Exchange. Additionally: `send_to`/`recv_from` equal to rank() or out of range,
  // or -1 with a non-zero total, is Internal (a bug in the caller); calling before Connect is
  // FailedPrecondition. Any failure leaves the mesh unusable (the streams are mid-message).
  // config.lazy: a peer not yet connected is connected first, waiting up to timeout_seconds for
  // it (DeadlineExceeded naming it) or Interrupt.
  Status Exchange(int send_to, int recv_from, StreamExchange& exchange,
                  const std::string& what) override;
  // Makes the running and every later Exchange (and a running Connect) return `why`
  // promptly. The first call wins. Any thread.
  void Interrupt(const Status& why) override;

 private:
  TcpMesh(const Config& config, UniqueFd listener, UniqueFd interrupt_fd, std::string address);
  Status InterruptStatus() const;
  Status CheckPeer(int peer, size_t total, const char* role, const std::string& what) const;
  // Sends every connected peer one byte on its data connection and waits for one from each.
  Status SyncPeers(const std::vector<UniqueFd>& peers,
                   std::chrono::steady_clock::time_point deadline);
  // One MeshConnector run on the listener for the connections of `generation`.
  // `only`: the ranks to connect (MeshConnector::Params::only; empty: all).
  StatusOr<std::vector<UniqueFd>> ConnectSet(const std::vector<SocketAddress>& resolved,
                                             const std::string& generation,
                                             std::chrono::steady_clock::time_point deadline,
                                             std::vector<int> only = {});
  // What every MeshConnector run of this mesh shares, for the connections of `generation`.
  MeshConnector::Params ConnectorParams(const std::string& generation);
  // config.lazy: connects `send_to`/`recv_from` (-1: none) if they are not yet, stashing the
  // connections other peers make meanwhile.
  Status ConnectOnFirstUse(int send_to, int recv_from, const std::string& what);

  // Constant after construction.
  const Config config_;
  const std::string listen_address_;
  // eventfd that becomes (and stays) readable on Interrupt; written by any thread (a write to
  // an eventfd is atomic), polled by the owner thread.
  const UniqueFd interrupt_fd_;

  // Owner thread only.
  std::string generation_;  // overrides config_.auth.generation once set
  UniqueFd listener_;
  std::vector<SocketAddress> resolved_;  // config.lazy: where the lower ranks listen
  std::vector<UniqueFd> peers_;          // by rank; empty until Connect succeeds
  std::vector<UniqueFd> round_peers_;    // by rank; see TakeRoundConnections
  std::vector<UniqueFd> p2p_peers_;      // by rank; see TakeP2pConnections
  bool connect_called_ = false;
  bool busy_poll_ = false;  // see SetCoreShare

  mutable Mutex mu_;
  Status interrupt_status_ KOLO_GUARDED_BY(mu_);  // set once by Interrupt
  std::atomic<bool> interrupted_{false};          // fast check; true once interrupt_status_ is set
};

}  // namespace kolo::transport
