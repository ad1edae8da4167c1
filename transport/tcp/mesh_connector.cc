#include "transport/tcp/mesh_connector.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "core/clock.h"
#include "core/errno_status.h"
#include "transport/tcp/mesh_handshake.h"

namespace kolo::transport {
namespace {

// A flood of connections (port scan, misdirected clients) is refused beyond this many.
constexpr size_t kMaxPendingConnections = 64;
constexpr std::chrono::milliseconds kMaxDialBackoff{1000};

// Groups refusal log lines by the kind of failure, for rate limiting.
std::string RefusalKey(const std::string& error) {
  return error.substr(0, std::min<size_t>(error.find_first_of("0123456789"), 24));
}

}  // namespace

struct MeshConnector::Pending {
  enum class Stage {
    kAwaitAccept,  // outbound: our Dial is (being) sent
    kAwaitDial,    // inbound: nothing read yet
    kAwaitProof,   // inbound: our Accept is (being) sent
    kDone,         // handshaken once `out` is flushed
  };
  UniqueFd fd;
  bool outbound = false;
  int peer = -1;            // dialled rank, or the rank an inbound connection proved
  bool connecting = false;  // outbound: connect() in flight
  Stage stage = Stage::kAwaitDial;
  std::string out;  // our next frame, being sent
  size_t out_sent = 0;
  MeshFrameReader in;
  std::string my_nonce;
  std::string peer_nonce;
  int claimed_rank = -1;  // inbound: the rank its Dial claims (not yet proven)
  SteadyTime deadline;
  std::string remote;  // "ip:port", for messages
};

MeshConnector::MeshConnector(Params params, std::vector<SocketAddress> peers)
    : params_(std::move(params)),
      peers_(std::move(peers)),
      dials_(params_.size),
      claimed_(params_.size, false),
      connected_(params_.size),
      refusals_(params_.logger, "data connection") {
  wanted_.assign(params_.size, params_.only.empty());
  for (int j : params_.only) {
    if (j >= 0 && j < params_.size) wanted_[j] = true;
  }
  if (params_.rank >= 0 && params_.rank < params_.size) wanted_[params_.rank] = false;
  wanted_count_ = static_cast<int>(std::count(wanted_.begin(), wanted_.end(), true));
  for (size_t j = 0; j < params_.already_connected.size() && j < claimed_.size(); ++j) {
    if (params_.already_connected[j]) claimed_[j] = true;
  }
}

MeshConnector::~MeshConnector() = default;

int MeshConnector::wanted_connected_count() const {
  int count = 0;
  for (int j = 0; j < params_.size; ++j) count += wanted_[j] && connected_[j].valid() ? 1 : 0;
  return count;
}

StatusOr<std::vector<UniqueFd>> MeshConnector::Run(SteadyTime deadline) {
  for (;;) {
    const bool wanted_up = wanted_connected_count() == wanted_count_;
    // An inbound connection we have answered (Accept sent) is not closed: its dialler may already
    // count it as up once its Proof is sent. So a lazy pass waits for those proofs too (each
    // bounded by its handshake deadline).
    if (wanted_up && !(params_.accept_others && AwaitingProof())) break;
    SteadyTime now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      if (wanted_up) break;
      return TimeoutStatus();
    }
    StartDials(now, deadline);
    std::vector<pollfd> fds = {{params_.interrupt_fd, POLLIN, 0}, {params_.listen_fd, POLLIN, 0}};
    for (const auto& p : pending_) {
      const bool writing = p->connecting || p->out_sent < p->out.size();
      fds.push_back({p->fd.get(), static_cast<short>(writing ? POLLOUT : POLLIN), 0});
    }
    if (poll(fds.data(), fds.size(), PollTimeout(now, deadline)) < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "poll() while connecting the data mesh");
    }
    if (fds[0].revents != 0) return params_.interrupt_status();
    now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = *pending_[i];
      StepResult result;
      if (fds[i + 2].revents != 0) result = Step(p, fds[i + 2].revents);
      if (result.outcome == StepOutcome::kFatal) return Unavailable(result.error);
      if (result.outcome == StepOutcome::kContinue && now >= p.deadline) {
        result = {StepOutcome::kFailed,
                  "no handshake within " + SecondsText(params_.handshake_timeout_seconds)};
      }
      if (result.outcome != StepOutcome::kContinue) Finish(p, result, now);
    }
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [](const auto& p) { return !p->fd.valid(); }),
                   pending_.end());
    if (fds[1].revents != 0) KOLO_RETURN_IF_ERROR(AcceptAll(now, deadline));
  }
  for (const auto& p : pending_) {
    params_.logger->debug("closing unfinished data connection from {}: the wanted ones are up",
                          p->remote);
  }
  pending_.clear();
  return std::move(connected_);
}

bool MeshConnector::AwaitingProof() const {
  return std::any_of(pending_.begin(), pending_.end(), [](const auto& p) {
    return !p->outbound && p->stage != Pending::Stage::kAwaitDial;
  });
}

void MeshConnector::StartDials(SteadyTime now, SteadyTime deadline) {
  for (int j = 0; j < params_.rank; ++j) {
    Dial& dial = dials_[j];
    if (!wanted_[j] || connected_[j].valid() || dial.in_flight || now < dial.retry_at) continue;
    StatusOr<UniqueFd> fd = StartConnect(peers_[j]);
    if (!fd.ok()) {
      dial.last_error = fd.status().message();
      dial.retry_at = now + dial.backoff;
      dial.backoff = std::min(dial.backoff * 2, kMaxDialBackoff);
      continue;
    }
    StatusOr<std::string> nonce = RandomBytes(kNonceBytes);
    if (!nonce.ok()) {
      dial.last_error = nonce.status().message();
      dial.retry_at = now + dial.backoff;
      continue;
    }
    auto p = std::make_unique<Pending>();
    p->fd = std::move(fd).value();
    p->outbound = true;
    p->peer = j;
    p->connecting = true;
    p->stage = Pending::Stage::kAwaitAccept;
    p->my_nonce = std::move(nonce).value();
    p->out = EncodeMeshFrame(
        {kMeshProtocolVersion, MeshFrameKind::kDial, params_.rank, params_.size, p->my_nonce, ""});
    p->deadline = std::min(deadline, AddSeconds(now, params_.handshake_timeout_seconds));
    p->remote = peers_[j].ToString();
    dial.in_flight = true;
    pending_.push_back(std::move(p));
  }
}

Status MeshConnector::AcceptAll(SteadyTime now, SteadyTime deadline) {
  for (;;) {
    std::string remote;
    StatusOr<UniqueFd> fd = AcceptOne(params_.listen_fd, &remote);
    if (!fd.ok()) return fd.status().WithContext("connecting the data mesh");
    if (!fd->valid()) return Status::Ok();
    if (Status tuned = TuneDataSocket(fd->get()); !tuned.ok()) {
      refusals_.Refused("socket", remote, tuned.message());
      continue;  // closes it
    }
    if (pending_.size() >= kMaxPendingConnections) {
      refusals_.Refused("flood", remote,
                        std::to_string(pending_.size()) + " connections are mid-handshake");
      continue;  // closes it
    }
    auto p = std::make_unique<Pending>();
    p->fd = std::move(fd).value();
    p->deadline = std::min(deadline, AddSeconds(now, params_.handshake_timeout_seconds));
    p->remote = remote;
    pending_.push_back(std::move(p));
  }
}

int MeshConnector::PollTimeout(SteadyTime now, SteadyTime deadline) const {
  SteadyTime wake = deadline;
  for (const auto& p : pending_) wake = std::min(wake, p->deadline);
  for (int j = 0; j < params_.rank; ++j) {
    if (wanted_[j] && !connected_[j].valid() && !dials_[j].in_flight) {
      wake = std::min(wake, dials_[j].retry_at);
    }
  }
  return PollTimeoutMs(now, wake);
}

MeshConnector::StepResult MeshConnector::Step(Pending& p, short revents) {
  if (p.connecting) {
    const int err = PendingSocketError(p.fd.get());
    if (err != 0) return {StepOutcome::kFailed, ErrnoText(err)};
    if ((revents & POLLOUT) == 0) return {};
    p.connecting = false;
  }
  for (;;) {
    StepResult result = Flush(p);
    if (result.outcome != StepOutcome::kDone) return result;
    if (p.stage == Pending::Stage::kDone) return result;
    result = ReadFrame(p);
    if (result.outcome != StepOutcome::kDone) return result;
    result = OnFrame(p);
    if (result.outcome != StepOutcome::kContinue) return result;
  }
}

MeshConnector::StepResult MeshConnector::Flush(Pending& p) {
  while (p.out_sent < p.out.size()) {
    IoResult io = SendSome(p.fd.get(), p.out.data() + p.out_sent, p.out.size() - p.out_sent);
    if (io.error != 0) return {StepOutcome::kFailed, ErrnoText(io.error)};
    if (io.would_block()) return {};
    p.out_sent += io.bytes;
  }
  return {StepOutcome::kDone, ""};
}

MeshConnector::StepResult MeshConnector::ReadFrame(Pending& p) {
  while (p.in.BytesWanted() > 0) {
    IoResult io = RecvSome(p.fd.get(), p.in.WritePtr(), p.in.BytesWanted());
    if (io.eof) return {StepOutcome::kFailed, "closed the connection during the handshake"};
    if (io.error != 0) return {StepOutcome::kFailed, ErrnoText(io.error)};
    if (io.would_block()) return {};
    Status status = p.in.Advance(io.bytes);
    if (!status.ok()) return {StepOutcome::kFailed, status.message()};
  }
  return {StepOutcome::kDone, ""};
}

// Dispatches a complete frame by stage; kContinue: go on with the next flush or read.
MeshConnector::StepResult MeshConnector::OnFrame(Pending& p) {
  const MeshFrameKind kind = p.in.frame().kind;
  const MeshFrameKind wanted = p.stage == Pending::Stage::kAwaitAccept ? MeshFrameKind::kAccept
                               : p.stage == Pending::Stage::kAwaitDial ? MeshFrameKind::kDial
                                                                       : MeshFrameKind::kProof;
  StepResult result;
  if (kind != wanted) {
    result = {StepOutcome::kFailed, "handshake messages out of order"};
  } else if (p.stage == Pending::Stage::kAwaitAccept) {
    result = OnAccept(p);
  } else if (p.stage == Pending::Stage::kAwaitDial) {
    result = OnDial(p);
  } else {
    result = OnProof(p);
  }
  p.in = MeshFrameReader();
  return result;
}

MeshConnector::StepResult MeshConnector::OnAccept(Pending& p) {
  const MeshFrame& frame = p.in.frame();
  Status check = CheckPeerIdentity(frame, params_.rank, params_.size, p.peer);
  const std::string expected = MeshProof(params_.auth, MeshRole::kAcceptor, params_.rank, p.peer,
                                         params_.size, p.my_nonce, frame.nonce);
  if (check.ok() && !MacEquals(frame.proof, expected)) {
    check = Unavailable(
        "it could not prove that it holds this job's secret (a different KOLO_SECRET or "
        "KOLO_JOB_ID, another job or an earlier generation of it)");
  }
  if (!check.ok()) {
    // A lazy pass retries instead (until its deadline, which then names this answer): the peer
    // may still be accepting its round connections on the same listener and have answered
    // with their generation. Its ring neighbours proved its secret at Connect.
    return {params_.accept_others ? StepOutcome::kFailed : StepOutcome::kFatal,
            "data mesh of rank " + std::to_string(params_.rank) + ": " + p.remote +
                ", the address of rank " + std::to_string(p.peer) +
                ", answered the handshake wrongly: " + check.message()};
  }
  p.out =
      EncodeMeshFrame({kMeshProtocolVersion, MeshFrameKind::kProof, params_.rank, params_.size, "",
                       MeshProof(params_.auth, MeshRole::kDialler, params_.rank, p.peer,
                                 params_.size, p.my_nonce, frame.nonce)});
  p.out_sent = 0;
  p.stage = Pending::Stage::kDone;
  return {};
}

MeshConnector::StepResult MeshConnector::OnDial(Pending& p) {
  const MeshFrame& frame = p.in.frame();
  Status check = CheckPeerIdentity(frame, params_.rank, params_.size, -1);
  if (!check.ok()) return {StepOutcome::kFailed, check.message()};
  const std::string who = "rank " + std::to_string(frame.rank);
  if (frame.rank < params_.rank) {
    return {StepOutcome::kFailed, who + " dialled rank " + std::to_string(params_.rank) +
                                      ", but lower ranks are dialled by higher ones"};
  }
  if (!wanted_[frame.rank] && !params_.accept_others) {
    return {StepOutcome::kFailed,
            who + " dialled rank " + std::to_string(params_.rank) +
                ", which does not connect to it in this set",
            /*outside_set=*/true};
  }
  // In a lazy mesh's start, a second dial from a claimed rank is its first-use data dial,
  // arriving while we connect the round lane: expected, and retried (see outside_set).
  if (claimed_[frame.rank]) {
    return {StepOutcome::kFailed, "duplicate connection for " + who, /*outside_set=*/true};
  }
  StatusOr<std::string> nonce = RandomBytes(kNonceBytes);
  if (!nonce.ok()) return {StepOutcome::kFailed, nonce.status().message()};
  p.my_nonce = std::move(nonce).value();
  p.peer_nonce = frame.nonce;
  p.claimed_rank = frame.rank;
  p.out = EncodeMeshFrame({kMeshProtocolVersion, MeshFrameKind::kAccept, params_.rank, params_.size,
                           p.my_nonce,
                           MeshProof(params_.auth, MeshRole::kAcceptor, frame.rank, params_.rank,
                                     params_.size, p.peer_nonce, p.my_nonce)});
  p.out_sent = 0;
  p.stage = Pending::Stage::kAwaitProof;
  return {};
}

MeshConnector::StepResult MeshConnector::OnProof(Pending& p) {
  const MeshFrame& frame = p.in.frame();
  if (frame.rank != p.claimed_rank || frame.size != params_.size) {
    return {StepOutcome::kFailed, "the proof names another rank than the dial"};
  }
  const std::string expected = MeshProof(params_.auth, MeshRole::kDialler, p.claimed_rank,
                                         params_.rank, params_.size, p.peer_nonce, p.my_nonce);
  if (!MacEquals(frame.proof, expected)) {
    return {StepOutcome::kFailed, "wrong handshake proof for rank " +
                                      std::to_string(p.claimed_rank) +
                                      " (no or another job secret, or a replayed answer)"};
  }
  if (claimed_[p.claimed_rank]) {
    return {StepOutcome::kFailed, "duplicate connection for rank " + std::to_string(p.claimed_rank),
            /*outside_set=*/true};
  }
  claimed_[p.claimed_rank] = true;
  p.peer = p.claimed_rank;
  p.stage = Pending::Stage::kDone;
  return {};
}

void MeshConnector::Finish(Pending& p, const StepResult& result, SteadyTime now) {
  if (result.outcome == StepOutcome::kDone) {
    params_.logger->debug("data connection to rank {} ({}) is up", p.peer, p.remote);
    if (p.outbound) dials_[p.peer].in_flight = false;
    connected_[p.peer] = std::move(p.fd);
    return;
  }
  if (p.outbound) {
    Dial& dial = dials_[p.peer];
    dial.in_flight = false;
    dial.last_error = result.error;
    dial.retry_at = now + dial.backoff;
    dial.backoff = std::min(dial.backoff * 2, kMaxDialBackoff);
    params_.logger->debug("dialling rank {} at {} failed, will retry: {}", p.peer, p.remote,
                          result.error);
  } else {
    // An inbound connection claims its rank only once handshaken, so a refused one holds none.
    if (result.outside_set && params_.outside_dials_expected) {
      params_.logger->debug("refused data connection from {} for now: {}", p.remote, result.error);
    } else {
      refusals_.Refused(RefusalKey(result.error), p.remote, result.error);
    }
  }
  p.fd.Reset();
}

Status MeshConnector::TimeoutStatus() const {
  std::string missing;
  for (int j = 0; j < params_.size; ++j) {
    if (!wanted_[j] || connected_[j].valid()) continue;
    missing += missing.empty() ? "" : "; ";
    if (j < params_.rank) {
      missing += "rank " + std::to_string(j) + " at " + peers_[j].ToString() + ": " +
                 (dials_[j].in_flight ? "no handshake answer yet" : dials_[j].last_error);
    } else {
      missing += "rank " + std::to_string(j) + " never connected to this rank";
    }
  }
  return DeadlineExceeded("data mesh of rank " + std::to_string(params_.rank) +
                          ": not connected to every peer by the deadline: " + missing);
}

}  // namespace kolo::transport
