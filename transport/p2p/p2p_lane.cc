#include "transport/p2p/p2p_lane.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>

#include <algorithm>
#include <cerrno>

#include "core/errno_status.h"
#include "transport/p2p/p2p_ring_setup.h"

namespace kolo::transport {
namespace {

using SteadyClock = std::chrono::steady_clock;

// With no deadline nearer, the lane's thread still wakes this often to look at the deadlines of
// ops posted meanwhile (a post does not wake it for a later deadline): a timeout fires at most
// this late.
constexpr std::chrono::milliseconds kLaneTick{100};
// How long a large op just posted waits for its caller to drive it before the lane's thread
// watches the connections for it: over TCP the two then took turns at its bytes, each wake-up
// taking the other's core (measured, dist.send/recv 1 MiB over TCP: 580 -> 320 us). A small op
// does not wait: its exchange is over in a few microseconds, and a timer wake-up at the end of the
// grace costs more than the turn (4 KiB: 20-29 -> 78-97 us with the grace).
constexpr std::chrono::microseconds kLaneGrace{200};
// How often a driver polls the sockets of peers it reaches by rings, for their end (a peer that
// died) and their doorbells; it reads the rings on every pass.
constexpr std::chrono::microseconds kDriveSocketPoll{50};

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", s);
  return text;
}

// Whether a driver must poll the sockets now, not only now and then: a peer without rings, a
// socket with something to write or DATA to read.
bool SocketsBusy(const std::vector<std::unique_ptr<P2pLink>>& links) {
  for (const auto& link : links) {
    if (!link || !link->alive()) continue;
    if (link->ring() == nullptr || link->wants_socket_write() || !link->pulling().empty()) {
      return true;
    }
    const P2pInbound& in = link->inbound(P2pSource::kSocket);
    if (in.phase == P2pInbound::Phase::kPayload || in.header_got > 0) return true;
  }
  return false;
}

// The lane's thread is about to sleep in poll() on the sockets (true; then false: it may not
// sleep, bytes are in a ring) or is awake (false), as every ring's reader_sleeps says.
bool SetSleeping(const std::vector<std::unique_ptr<P2pLink>>& links, bool sleeping) {
  bool empty = true;
  for (const auto& link : links) {
    if (!link || link->ring() == nullptr || !link->alive()) continue;
    link->ring()->SetSleeping(sleeping);
    if (sleeping && link->ring()->HasData()) empty = false;
  }
  if (!empty) SetSleeping(links, false);
  return empty;
}

// Whether a link has something to write that the lane's thread must watch for: the socket's
// (until it takes more), or the ring's when no driver writes on by itself (the reader rings).
bool WatchForWrites(const std::vector<std::unique_ptr<P2pLink>>& links, bool driven) {
  for (const auto& link : links) {
    if (link && (link->wants_socket_write() || (!driven && link->wants_write()))) return true;
  }
  return false;
}

// The job failed or kolo stops (`why`): every peer is told before it sees this rank's end, so
// that a peer waiting on this rank names the cause, not only this rank. The lane's thread writes
// it with the rest.
void QueueFarewell(const std::vector<std::unique_ptr<P2pLink>>& links, const Status& why) {
  for (const auto& link : links) {
    if (!link || !link->alive()) continue;
    link->QueueAnswer(P2pFrameType::kCancel, 0, why.message(), static_cast<uint8_t>(why.code()));
  }
}

// How long until the first of `pending`'s deadlines (zero: passed).
SteadyClock::duration UntilNearestDeadline(const std::vector<std::shared_ptr<P2pRequest>>& pending,
                                           SteadyClock::time_point now) {
  SteadyClock::duration nearest = SteadyClock::duration::max();
  for (const auto& request : pending) {
    nearest = std::min(nearest, std::max(SteadyClock::duration::zero(),
                                         request->deadline - now + std::chrono::microseconds(1)));
  }
  return nearest;
}

}  // namespace

StatusOr<std::unique_ptr<P2pLane>> P2pLane::Start(Config config, std::vector<UniqueFd> peers) {
  if (static_cast<int>(peers.size()) != config.size) {
    return InvalidArgument("point-to-point lane: " + std::to_string(peers.size()) +
                           " connections for a job of " + std::to_string(config.size));
  }
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return ErrnoToStatus(errno, "eventfd() for the point-to-point lane");
  if (!config.logger) config.logger = MakeLogger(config.rank, "p2p", spdlog::level::warn);
  config.same_host.resize(config.size, false);
  std::vector<int> fds(config.size, -1);
  for (int rank = 0; rank < config.size; ++rank) {
    if (rank != config.rank && peers[rank].valid()) fds[rank] = peers[rank].get();
  }
  KOLO_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<P2pRing>> rings,
                        ConnectP2pRings(config.rank, config.same_host, config.rings, fds,
                                        config.start_timeout_seconds, config.logger));
  std::unique_ptr<P2pLane> lane(
      new P2pLane(std::move(config), std::move(peers), std::move(rings), std::move(wake)));
  lane->thread_ = std::thread([raw = lane.get()] { raw->Run(); });
  return lane;
}

P2pLane::P2pLane(Config config, std::vector<UniqueFd> peers,
                 std::vector<std::unique_ptr<P2pRing>> rings, UniqueFd wake)
    : config_(std::move(config)), wake_(std::move(wake)) {
  MutexLock lock(&mu_);
  links_.resize(config_.size);
  for (int rank = 0; rank < config_.size; ++rank) {
    if (rank != config_.rank && peers[rank].valid()) {
      links_[rank] = std::make_unique<P2pLink>(rank, std::move(peers[rank]));
      if (rings[rank]) links_[rank]->AttachRing(std::move(rings[rank]));
    }
  }
}

P2pLane::~P2pLane() {
  Stop(ShutdownError("kolo's point-to-point lane was destroyed"));
}

void P2pLane::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
}

Status P2pLane::Post(std::shared_ptr<P2pRequest> request, bool caller_drives) {
  std::vector<Finish> done;
  bool wake = false;
  {
    MutexLock lock(&mu_);
    if (!fatal_.ok()) return fatal_;
    if (request->peer >= 0) {
      const P2pLink* link = links_[request->peer].get();
      if (link == nullptr) {
        return FailedPrecondition(request->what + ": no point-to-point connection to rank " +
                                  std::to_string(request->peer));
      }
      if (!link->alive()) return link->dead_why().WithContext(request->what);
    }
    const SteadyClock::time_point now = SteadyClock::now();
    request->posted_at = now;
    request->deadline = now + std::chrono::duration_cast<SteadyClock::duration>(
                                  std::chrono::duration<double>(request->timeout_seconds));
    pending_.push_back(request);
    activity_.pending.fetch_add(1, std::memory_order_relaxed);
    if (request->is_send) {
      SendOfferLocked(request);
    } else {
      PostRecvLocked(request);
    }
    // The thread watches the connections only while ops are pending and nobody drives them; it
    // sleeps up to kLaneTick, so a nearer deadline needs it to look now too.
    const bool pending = request->state != P2pRequest::State::kDone;
    // A thread already watching the connections sees this op's answers there.
    const bool watched = activity_.watching.load();
    wake =
        pending && ((!caller_drives && !watched) || request->timeout_seconds < 0.1 ||
                    (request->is_send && !caller_drives && links_[request->peer]->wants_write()));
    done.swap(finished_);
  }
  if (wake) Wake();
  RunCallbacks(std::move(done), /*here=*/false);
  return Status::Ok();
}

bool P2pLane::Drive(const std::function<bool()>& done, std::chrono::microseconds budget) {
  const BetweenPolls how = config_.between_polls;
  if (done()) return true;
  activity_.drivers.fetch_add(1);
  PollBudget left(budget, how);
  std::vector<pollfd> fds;
  bool finished = false;
  bool first = true;
  bool rings = false;                     // whether any peer is reached by a ring
  SteadyClock::time_point sockets_due{};  // when to poll the sockets again
  for (;;) {
    std::vector<Finish> completed;
    bool poll_sockets = false;
    {
      MutexLock lock(&mu_);
      // This thread reads the rings now: no writer need ring the lane's thread (the lane's
      // thread set the flags while nobody drove; it does not while anybody does).
      if (first) {
        SetSleeping(links_, false);
        for (const auto& link : links_) rings = rings || (link && link->ring() != nullptr);
      }
      first = false;
      const SteadyClock::time_point now = SteadyClock::now();
      poll_sockets = now >= sockets_due || SocketsBusy(links_);
      if (poll_sockets) sockets_due = now + kDriveSocketPoll;
      PollSetLocked(poll_sockets, &fds);
      if (!poll_sockets) {
        ServeLocked(fds);  // the rings only
        completed.swap(finished_);
      }
    }
    // Without rings nothing arrives but by the sockets.
    if (poll_sockets && (::poll(fds.data(), fds.size(), 0) > 0 || rings)) {
      MutexLock lock(&mu_);
      ServeLocked(fds);
      completed.swap(finished_);
    }
    RunCallbacks(std::move(completed), /*here=*/true);  // a waiting caller runs them (no hand-off)
    if (done()) {
      finished = true;
      break;
    }
    if (left.Spent()) break;
    PauseBetweenPolls(how);
  }
  // The lane's thread watches the connections again once no caller does, if anything waits.
  if (!finished) {
    activity_.gave_up_ns.store(SteadyClock::now().time_since_epoch().count());
  }
  if (activity_.drivers.fetch_sub(1) == 1) {
    // So does a ring this thread wrote without asking to be rung (an ACK behind a full ring).
    bool unwritten = false;
    {
      MutexLock lock(&mu_);
      unwritten = WatchForWrites(links_, /*driven=*/false);
    }
    if (busy() || unwritten) Wake();
  }
  return finished;
}

void P2pLane::Interrupt(const Status& why) {
  {
    MutexLock lock(&mu_);
    if (!fatal_.ok()) return;
    fatal_ = why;
    QueueFarewell(links_, why);
  }
  Wake();
}

void P2pLane::Stop(const Status& why) {
  {
    MutexLock lock(&mu_);
    if (fatal_.ok()) {
      fatal_ = why;
      QueueFarewell(links_, why);
    }
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void P2pLane::Run() {
  std::vector<pollfd> fds;
  for (;;) {
    SteadyClock::duration timeout = kLaneTick;
    bool sockets = false;
    {
      MutexLock lock(&mu_);
      // While a caller drives, it serves the connections (a wake-up here would take the core
      // from it); with nothing pending, what arrives waits in the socket for the receive. A large
      // op just posted gets kLaneGrace for its caller to start waiting on it (c10d's blocking
      // send is an isend and a wait) before this thread watches the connections for it; not
      // after a driver gave up on it.
      const SteadyClock::time_point now = SteadyClock::now();
      sockets = activity_.drivers.load() == 0 && !pending_.empty();
      const P2pRequest* newest = pending_.empty() ? nullptr : pending_.back().get();
      const SteadyClock::time_point gave_up{SteadyClock::duration(activity_.gave_up_ns.load())};
      if (sockets && newest->bytes > config_.eager_bytes && now - newest->posted_at < kLaneGrace &&
          newest->posted_at > gave_up) {
        sockets = false;
        timeout = newest->posted_at + kLaneGrace - now;
      }
      sockets = sockets || WatchForWrites(links_, activity_.drivers.load() > 0);
      PollSetLocked(sockets, &fds);
      activity_.watching.store(sockets);  // under mu_: Post reads it there
      // Asleep on the sockets, the rings' writers must ring: say so, then look once more.
      if (sockets && !SetSleeping(links_, true)) timeout = SteadyClock::duration::zero();
      timeout = std::min(timeout, UntilNearestDeadline(pending_, now));
      if (!fatal_.ok() && !pending_.empty()) timeout = SteadyClock::duration::zero();
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
    const timespec wait{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    if (::ppoll(fds.data(), fds.size(), &wait, nullptr) < 0 && errno != EINTR) {
      config_.logger->error("point-to-point lane: poll() failed: {}", std::strerror(errno));
    }
    if ((fds[0].revents & POLLIN) != 0) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t n = ::read(wake_.get(), &count, sizeof(count));
    }
    std::vector<Finish> done;
    bool stop = false;
    {
      MutexLock lock(&mu_);
      SetSleeping(links_, false);
      ServeLocked(fds);
      done.swap(finished_);
      done.insert(done.end(), std::make_move_iterator(deferred_.begin()),
                  std::make_move_iterator(deferred_.end()));
      deferred_.clear();
      stop = stopping_ && pending_.empty();
    }
    RunCallbacks(std::move(done), /*here=*/true);
    if (stop) break;
  }
  MutexLock lock(&mu_);
  for (auto& link : links_) {
    if (link) link->Kill(ShutdownError("this rank's point-to-point lane stopped"));
  }
}

void P2pLane::PollSetLocked(bool sockets, std::vector<pollfd>* fds) {
  fds->clear();
  fds->push_back({wake_.get(), POLLIN, 0});
  if (!sockets) return;
  for (const auto& link : links_) {
    if (!link || !link->alive()) continue;
    fds->push_back(
        {link->fd(), static_cast<short>(POLLIN | (link->wants_socket_write() ? POLLOUT : 0)), 0});
  }
}

void P2pLane::ServeLocked(const std::vector<pollfd>& polled) {
  for (size_t i = 1; i < polled.size(); ++i) {
    if (polled[i].revents == 0) continue;
    for (auto& link : links_) {
      if (!link || link->fd() != polled[i].fd || !link->alive()) continue;
      if ((polled[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        link->Readable();
        ReadLocked(*link, P2pSource::kSocket);
      }
    }
  }
  for (auto& link : links_) {
    if (link && link->alive() && link->ring() != nullptr && link->ring()->HasData()) {
      ReadLocked(*link, P2pSource::kRing);
    }
  }
  for (auto& link : links_) {
    if (link && link->alive() && link->wants_write()) FlushLocked(*link);
  }
  ExpireLocked(SteadyClock::now());
}

void P2pLane::FlushLocked(P2pLink& link) {
  std::vector<std::shared_ptr<P2pRequest>> sent;
  // A driver writes on as the reader makes room; the lane's thread asks to be rung.
  const Status flushed = link.Flush(&sent, /*ask_for_room=*/activity_.drivers.load() == 0);
  for (const auto& send : sent) CompleteLocked(send, Status::Ok());  // their DATA left
  if (!flushed.ok()) PeerGoneLocked(link);
}

void P2pLane::ExpireLocked(SteadyClock::time_point now) {
  std::vector<std::pair<std::shared_ptr<P2pRequest>, Status>> expired;
  for (const auto& request : pending_) {
    if (!fatal_.ok()) {
      expired.emplace_back(request, fatal_.WithContext(request->what));
      continue;
    }
    if (now < request->deadline) continue;
    const std::string waited = Seconds(request->timeout_seconds);
    const int peer = request->matched_peer >= 0 ? request->matched_peer : request->peer;
    const std::string who =
        peer >= 0 ? "rank " + std::to_string(CallerRankOf(*request, peer)) : "any rank";
    std::string why;
    if (request->state == P2pRequest::State::kPosted) {
      why = request->is_send ? who + " posted no matching recv within " + waited
                             : "no matching send from " + who + " arrived within " + waited;
    } else {
      why = "the transfer with " + who + " made no progress for " + waited;
    }
    expired.emplace_back(request, DeadlineExceeded(request->what + ": " + why +
                                                   " (P2pOptions::timeout_seconds, "
                                                   "KOLO_TIMEOUT_SECONDS)"));
  }
  for (const auto& [request, why] : expired) FailLocked(request, why);
}

void P2pLane::FailLocked(const std::shared_ptr<P2pRequest>& request, const Status& why) {
  if (request->state == P2pRequest::State::kDone) return;
  const int peer = request->is_send ? request->peer : request->matched_peer;
  P2pLink* link = peer >= 0 ? links_[peer].get() : nullptr;
  if (!request->is_send && request->state == P2pRequest::State::kPosted) {
    matcher_.RemoveRecv(request.get());
  }
  if (link != nullptr) {
    if (request->is_send) {
      link->offered().erase(request->seq);
      link->Detach(request.get());
      if (request->state == P2pRequest::State::kPosted && link->alive()) {
        // A receive that pulled it fails with this reason (the job's abort names the lost
        // rank); a timeout is said by the receiver itself.
        const bool timed_out = why.code() == StatusCode::kDeadlineExceeded;
        link->QueueAnswer(P2pFrameType::kCancel, request->seq, timed_out ? "" : why.message(),
                          static_cast<uint8_t>(why.code()));
      }
    } else {
      link->pulling().erase(request->seq);
      for (P2pSource source : {P2pSource::kSocket, P2pSource::kRing}) {
        P2pInbound& in = link->inbound(source);
        if (in.recv == request) {
          in.discard = true;  // the rest of its bytes go nowhere
          in.recv.reset();
        }
      }
    }
  }
  CompleteLocked(request, why);
}

void P2pLane::CompleteLocked(const std::shared_ptr<P2pRequest>& request, const Status& status) {
  if (request->state == P2pRequest::State::kDone) return;
  request->state = P2pRequest::State::kDone;
  pending_.erase(std::remove(pending_.begin(), pending_.end(), request), pending_.end());
  activity_.pending.fetch_sub(1, std::memory_order_relaxed);
  Trace(*request, status);
  finished_.push_back({request, status});
}

void P2pLane::RunCallbacks(std::vector<Finish> done, bool here) {
  bool handed_over = false;
  for (Finish& finish : done) {
    if (here || finish.request->done_anywhere) {
      if (finish.request->done) finish.request->done(finish.status);
      finish.request->done = nullptr;  // what it captured goes now
    } else {
      MutexLock lock(&mu_);
      deferred_.push_back(std::move(finish));
      handed_over = true;
    }
  }
  if (handed_over) Wake();
}

void P2pLane::Trace(const P2pRequest& request, const Status& status) const {
  TraceSink* sink = config_.trace;
  if (sink == nullptr || !sink->enabled()) return;
  const Clock::TimePoint end = SteadyClock::now();
  const bool matched = request.matched_at != Clock::TimePoint{};
  const std::string track = request.what;
  sink->Record({'X', config_.rank, track, request.is_send ? "SEND" : "RECV", request.posted_at, end,
                "{\"bytes\":" + std::to_string(request.bytes) +
                    ",\"tag\":" + std::to_string(request.tag) + ",\"status\":\"" +
                    JsonEscape(status.ok() ? "OK" : status.ToString()) + "\"}"});
  sink->Record({'X', config_.rank, track, "WAIT_FOR_PEER", request.posted_at,
                matched ? request.matched_at : end, ""});
  if (matched) sink->Record({'X', config_.rank, track, "TRANSFER", request.matched_at, end, ""});
}

}  // namespace kolo::transport
