#include "transport/tcp/tcp_mesh.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/clock.h"
#include "core/config/config_table.h"
#include "core/errno_status.h"
#include "core/round_lane.h"
#include "transport/deadline.h"
#include "transport/tcp/mesh_connector.h"
#include "transport/tcp/mesh_handshake.h"
#include "transport/tcp/stream_pump.h"
#include "transport/tcp/tcp_socket.h"

namespace kolo::transport {
namespace {

Status ValidateConfig(const TcpMesh::Config& config) {
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size) {
    return InvalidArgument("rank " + std::to_string(config.rank) + " is not valid in a job of " +
                           "size " + std::to_string(config.size));
  }
  if (!(config.timeout_seconds > 0)) {
    return InvalidArgument("KOLO_TIMEOUT_SECONDS must be positive, got " +
                           std::to_string(config.timeout_seconds));
  }
  if (IsWildcardHost(config.bind_host) && IsWildcardHost(config.advertise_host)) {
    return InvalidArgument("the data mesh listens on all interfaces ('" + config.bind_host +
                           "'), so it needs an advertise host that peers can connect to");
  }
  return Status::Ok();
}

TcpMesh::Config WithDefaultLogger(TcpMesh::Config config) {
  if (!config.logger) config.logger = MakeLogger(config.rank, "transport", spdlog::level::warn);
  return config;
}

// The byte each rank sends every peer once the data mesh is connected: the settings all
// ranks must share, KOLO_FAST_PATH in bit 0, the point-to-point connections (KOLO_P2P) in bit 1
// and KOLO_TRANSPORT above them, as a letter from 'A'.
char SettingsByte(const TcpMesh::Config& config) {
  return static_cast<char>('A' + (static_cast<int>(config.transport) << 2 |
                                  (config.p2p_lane ? 2 : 0) | (config.round_lane ? 1 : 0)));
}

// "" when `peer`'s settings byte matches ours, else the error text naming both settings.
std::string DescribeSettingsMismatch(int peer, char byte, const TcpMesh::Config& config) {
  const bool round_lane = config.round_lane;
  const Transport transport = config.transport;
  const int value = byte - 'A';
  const std::string who = "rank " + std::to_string(peer);
  if (value < 0 || (value >> 2) > static_cast<int>(Transport::kShm)) {
    return who + " sent an unknown settings byte " + std::to_string(static_cast<int>(byte)) +
           " (a different kolo build?)";
  }
  const bool peer_round_lane = (value & 1) != 0;
  const bool peer_p2p_lane = (value & 2) != 0;
  const auto peer_transport = static_cast<Transport>(value >> 2);
  if (peer_p2p_lane != config.p2p_lane) {
    return who + (peer_p2p_lane ? " connects" : " does not connect") +
           " point-to-point connections, this rank" + (config.p2p_lane ? " does" : " does not") +
           "; KOLO_P2P must be the same on every rank";
  }
  if (peer_round_lane != round_lane) {
    return who + " runs with KOLO_FAST_PATH=" + (peer_round_lane ? "1" : "0") +
           ", this rank with KOLO_FAST_PATH=" + (round_lane ? "1" : "0") +
           "; every rank must use the same setting";
  }
  if (peer_transport != transport) {
    return who + " runs with KOLO_TRANSPORT=" + TransportName(peer_transport) +
           ", this rank with KOLO_TRANSPORT=" + TransportName(transport) +
           "; every rank must use the same setting";
  }
  return "";
}

// Reads `peer`'s settings byte from `fd`: true once read and matching ours, false if it has not
// arrived, or why the mesh fails.
StatusOr<bool> ReadSettings(int fd, int peer, const TcpMesh::Config& config) {
  char byte = 0;
  IoResult io = RecvSome(fd, &byte, 1);
  if (io.would_block()) return false;
  if (io.bytes != 1) {
    return Unavailable("rank " + std::to_string(peer) +
                       " closed its data connection while the mesh was connecting");
  }
  const std::string mismatch = DescribeSettingsMismatch(peer, byte, config);
  if (!mismatch.empty()) return FailedPrecondition(mismatch);
  return true;
}

// SyncPeers' poll set: the interrupt fd, then every connected peer; and the rank of each
// (-1 for the interrupt fd).
struct SettingsExchange {
  std::vector<pollfd> waiting;
  std::vector<int> rank;
};

// Sends `ready` (SettingsByte) to every connected peer of ranks [0, size) and adds each to
// `exchange`.
Status SendSettings(const std::vector<UniqueFd>& peers, int size, char ready,
                    SettingsExchange* exchange) {
  for (int j = 0; j < size; ++j) {
    if (!peers[j].valid()) continue;
    IoResult io = SendSome(peers[j].get(), &ready, 1);  // an empty new socket takes one byte
    if (io.bytes != 1) {
      return Unavailable("rank " + std::to_string(j) + " closed its data connection at start (" +
                         (io.error != 0 ? ErrnoText(io.error) : std::string("no room")) + ")");
    }
    exchange->waiting.push_back({peers[j].get(), POLLIN, 0});
    exchange->rank.push_back(j);
  }
  return Status::Ok();
}

// A lazy mesh's connections at Connect: rank ± 1 around the ring, ascending.
std::vector<int> RingNeighbours(int rank, int size) {
  std::vector<int> ranks;
  if (size < 2) return ranks;
  ranks = {(rank + size - 1) % size, (rank + 1) % size};
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

int CountValid(const std::vector<UniqueFd>& fds) {
  return static_cast<int>(
      std::count_if(fds.begin(), fds.end(), [](const UniqueFd& fd) { return fd.valid(); }));
}

}  // namespace

StatusOr<std::unique_ptr<TcpMesh>> TcpMesh::Listen(const Config& config) {
  KOLO_RETURN_IF_ERROR(ValidateConfig(config).WithContext("data mesh"));
  int port = 0;
  StatusOr<UniqueFd> listener = ListenOn(config.bind_host, 0, &port);
  if (!listener.ok()) return listener.status().WithContext("data mesh");
  UniqueFd interrupt_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!interrupt_fd.valid()) return ErrnoToStatus(errno, "data mesh: eventfd()");
  const std::string host = config.advertise_host.empty() ? config.bind_host : config.advertise_host;
  return std::unique_ptr<TcpMesh>(new TcpMesh(config, std::move(listener).value(),
                                              std::move(interrupt_fd), JoinHostPort(host, port)));
}

TcpMesh::TcpMesh(const Config& config, UniqueFd listener, UniqueFd interrupt_fd,
                 std::string address)
    : config_(WithDefaultLogger(config)),
      listen_address_(std::move(address)),
      interrupt_fd_(std::move(interrupt_fd)),
      listener_(std::move(listener)) {
  config_.logger->debug("data mesh listening on {}", listen_address_);
}

TcpMesh::~TcpMesh() = default;

Status TcpMesh::Connect(const std::vector<std::string>& addresses,
                        std::chrono::steady_clock::time_point deadline) {
  if (interrupted_.load()) return InterruptStatus();
  const std::string context = "data mesh of rank " + std::to_string(config_.rank);
  if (connect_called_) return FailedPrecondition(context + ": Connect called twice");
  connect_called_ = true;
  if (addresses.size() != static_cast<size_t>(config_.size)) {
    return InvalidArgument(context + ": " + std::to_string(addresses.size()) +
                           " addresses for a job of size " + std::to_string(config_.size));
  }
  std::vector<SocketAddress> resolved(config_.size);
  for (int j = 0; j < config_.rank; ++j) {
    std::string host;
    int port = 0;
    Status parsed = ParseHostPort(addresses[j], &host, &port);
    StatusOr<SocketAddress> address = parsed.ok() ? ResolveAddress(host, port) : parsed;
    if (!address.ok()) {
      return address.status().WithContext(context + ": address of rank " + std::to_string(j));
    }
    resolved[j] = *address;
  }
  const SteadyTime start = std::chrono::steady_clock::now();
  const std::string generation = generation_.empty() ? config_.auth.generation : generation_;
  KOLO_ASSIGN_OR_RETURN(
      std::vector<UniqueFd> peers,
      ConnectSet(resolved, generation, deadline,
                 config_.lazy ? RingNeighbours(config_.rank, config_.size) : std::vector<int>{}));
  // Every peer must be done accepting data connections before round connections dial it, or
  // it would refuse them (and log it) as duplicates; and all must agree on having them (a lazy
  // mesh checks its ring neighbours, a chain through every rank, so some pair finds a mismatch).
  KOLO_RETURN_IF_ERROR(SyncPeers(peers, deadline).WithContext(context));
  if (config_.round_lane) {
    StatusOr<std::vector<UniqueFd>> rounds = ConnectSet(resolved, generation + "/rounds", deadline,
                                                        RoundPeersOf(config_.rank, config_.size));
    if (!rounds.ok()) return rounds.status().WithContext("fast-path round connections");
    round_peers_ = std::move(rounds).value();
  }
  if (config_.p2p_lane) {
    std::vector<int> everyone;
    for (int j = 0; j < config_.size; ++j) {
      if (j != config_.rank) everyone.push_back(j);
    }
    StatusOr<std::vector<UniqueFd>> p2p =
        ConnectSet(resolved, generation + "/p2p", deadline, std::move(everyone));
    if (!p2p.ok()) return p2p.status().WithContext("point-to-point connections");
    p2p_peers_ = std::move(p2p).value();
  }
  peers_ = std::move(peers);
  if (config_.lazy) {
    resolved_ = std::move(resolved);
  } else {
    listener_.Reset();
  }
  config_.logger->info("data mesh connected to {} peers in {} ms", CountValid(peers_),
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count());
  return Status::Ok();
}

Status TcpMesh::SyncPeers(const std::vector<UniqueFd>& peers,
                          std::chrono::steady_clock::time_point deadline) {
  SettingsExchange exchange{{{interrupt_fd_.get(), POLLIN, 0}}, {-1}};
  KOLO_RETURN_IF_ERROR(SendSettings(peers, config_.size, SettingsByte(config_), &exchange));
  std::vector<pollfd>& waiting = exchange.waiting;
  // Peer i's settings byte: true once read and matching, false if it has not arrived, or why
  // the mesh fails.
  auto read_settings = [&](size_t i) {
    return ReadSettings(waiting[i].fd, exchange.rank[i], config_);
  };
  size_t done = 1;
  while (done < waiting.size()) {
    const SteadyTime now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return DeadlineExceeded("not every peer finished connecting the data mesh by the deadline");
    }
    if (poll(waiting.data(), waiting.size(), PollTimeoutMs(now, deadline)) < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "poll() while connecting the data mesh");
    }
    if (waiting[0].revents != 0) {
      // A peer that found a settings mismatch fails its init and closes its control stream,
      // which interrupts us; its byte is already here and names the real cause.
      for (size_t i = 1; i < waiting.size(); ++i) {
        if (waiting[i].fd < 0) continue;
        StatusOr<bool> settings = read_settings(i);
        if (settings.status().code() == StatusCode::kFailedPrecondition) return settings.status();
      }
      return InterruptStatus();
    }
    for (size_t i = 1; i < waiting.size(); ++i) {
      if (waiting[i].fd < 0 || waiting[i].revents == 0) continue;
      KOLO_ASSIGN_OR_RETURN(bool read, read_settings(i));
      if (!read) continue;
      waiting[i].fd = -1;  // poll() skips it from now on
      ++done;
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<UniqueFd>> TcpMesh::ConnectSet(const std::vector<SocketAddress>& resolved,
                                                    const std::string& generation,
                                                    std::chrono::steady_clock::time_point deadline,
                                                    std::vector<int> only) {
  MeshConnector::Params params = ConnectorParams(generation);
  params.only = std::move(only);
  params.outside_dials_expected = config_.lazy;
  return MeshConnector(std::move(params), resolved).Run(deadline);
}

MeshConnector::Params TcpMesh::ConnectorParams(const std::string& generation) {
  MeshConnector::Params params;
  params.rank = config_.rank;
  params.size = config_.size;
  params.auth = config_.auth;
  params.auth.generation = generation;
  params.listen_fd = listener_.get();
  params.interrupt_fd = interrupt_fd_.get();
  params.interrupt_status = [this] { return InterruptStatus(); };
  params.handshake_timeout_seconds = config_.timeout_seconds;
  params.logger = config_.logger;
  return params;
}

void TcpMesh::SetCoreShare(int ranks, int cores, bool bound_to_own_cpus) {
  busy_poll_ = bound_to_own_cpus || ranks <= cores;
  config_.logger->debug("{} ranks on this rank's {} cores{}: busy polling {}", ranks, cores,
                        bound_to_own_cpus ? " (bound to its own)" : "", busy_poll_ ? "on" : "off");
}

Status TcpMesh::CheckPeer(int peer, size_t total, const char* role, const std::string& what) const {
  if (peer == -1) {
    if (total == 0) return Status::Ok();
    return Internal(what + ": " + role + " is -1 (no peer) but the exchange has " +
                    std::to_string(total) + " bytes for it");
  }
  if (peer < 0 || peer >= config_.size || peer == config_.rank) {
    return Internal(what + ": " + role + " rank " + std::to_string(peer) +
                    " is not a peer of rank " + std::to_string(config_.rank) +
                    " in a job of size " + std::to_string(config_.size));
  }
  return Status::Ok();
}

Status TcpMesh::Exchange(int send_to, int recv_from, StreamExchange& exchange,
                         const std::string& what) {
  if (interrupted_.load()) return InterruptStatus();
  const size_t send_total = exchange.send_total();
  const size_t recv_total = exchange.recv_total();
  KOLO_RETURN_IF_ERROR(CheckPeer(send_to, send_total, "send_to", what));
  KOLO_RETURN_IF_ERROR(CheckPeer(recv_from, recv_total, "recv_from", what));
  if (send_total == 0 && recv_total == 0) return Status::Ok();
  if (peers_.empty()) return FailedPrecondition(what + ": the data mesh is not connected");
  if (config_.lazy) {
    KOLO_RETURN_IF_ERROR(
        ConnectOnFirstUse(send_total > 0 ? send_to : -1, recv_total > 0 ? recv_from : -1, what));
  }
  PumpEnds ends;
  if (send_total > 0) {
    ends.send_fd = peers_[send_to].get();
    ends.send_peer = send_to;
  }
  if (recv_total > 0) {
    ends.recv_fd = peers_[recv_from].get();
    ends.recv_peer = recv_from;
  }
  ends.interrupt_fd = interrupt_fd_.get();
  ends.interrupt_status = [this] { return InterruptStatus(); };
  ends.timeout_seconds = config_.timeout_seconds;
  ends.busy_poll = busy_poll_;
  return PumpExchange(ends, exchange, what);
}

int TcpMesh::connected_peers() const {
  return CountValid(peers_);
}

Status TcpMesh::ConnectOnFirstUse(int send_to, int recv_from, const std::string& what) {
  std::vector<int> missing;
  for (int peer : {send_to, recv_from}) {
    if (peer >= 0 && !peers_[peer].valid()) missing.push_back(peer);
  }
  if (missing.empty()) return Status::Ok();
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  MeshConnector::Params params =
      ConnectorParams(generation_.empty() ? config_.auth.generation : generation_);
  params.only = missing;
  params.accept_others = true;
  params.already_connected.resize(config_.size);
  for (int j = 0; j < config_.size; ++j) params.already_connected[j] = peers_[j].valid();
  const SteadyTime deadline = AddSeconds(std::chrono::steady_clock::now(), config_.timeout_seconds);
  StatusOr<std::vector<UniqueFd>> connected =
      MeshConnector(std::move(params), resolved_).Run(deadline);
  if (!connected.ok()) {
    if (interrupted_.load()) return InterruptStatus();  // as every other wait reports it
    return connected.status().WithContext(what +
                                          ": connecting on first use (KOLO_TIMEOUT_SECONDS " +
                                          SecondsText(config_.timeout_seconds) + ")");
  }
  for (int j = 0; j < config_.size; ++j) {
    if (!(*connected)[j].valid()) continue;
    config_.logger->debug("{}: data connection to rank {} made on first use", what, j);
    peers_[j] = std::move((*connected)[j]);
  }
  return Status::Ok();
}

void TcpMesh::Interrupt(const Status& why) {
  {
    MutexLock lock(&mu_);
    if (interrupted_.load()) return;
    // An OK status would let an unfinished Exchange report success.
    interrupt_status_ = why.ok() ? Aborted("the data plane was interrupted") : why;
    interrupted_.store(true);
  }
  const uint64_t one = 1;
  // Cannot fail: the counter is far from overflow and the fd is open for our lifetime.
  [[maybe_unused]] ssize_t written = write(interrupt_fd_.get(), &one, sizeof(one));
}

Status TcpMesh::InterruptStatus() const {
  MutexLock lock(&mu_);
  return interrupt_status_;
}

}  // namespace kolo::transport
