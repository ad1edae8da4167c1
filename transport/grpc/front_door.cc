#include "transport/grpc/front_door.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "transport/deadline.h"
#include "transport/grpc/first_bytes.h"
#include "transport/grpc/listen_address.h"

namespace kolo::transport {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes peeked at once: the preface, and enough of anything else to name it.
constexpr size_t kPeekBytes = 64;
// Connections accepted per wake-up of one listener, so that waiting ones are not starved.
constexpr int kAcceptsPerWake = 64;

// "ipv4:127.0.0.1:41234" or "ipv6:[::1]:41234", as gRPC names peers.
std::string PeerString(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, host, sizeof(host));
    return std::string("ipv4:") + host + ":" + std::to_string(ntohs(v4.sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof(host));
    return std::string("ipv6:[") + host + "]:" + std::to_string(ntohs(v6.sin6_port));
  }
  if (address.ss_family == AF_UNIX) return "a local process (Unix-domain socket)";
  return "an unknown address";
}

std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", seconds);
  return text;
}

uint64_t SoftFdLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return static_cast<uint64_t>(limit.rlim_cur);
}

void SetReceiveLowWater(int fd, int bytes) {
  setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes));
}

// What has arrived on `fd` so far, left in the socket for gRPC: `bytes` < 0 when nothing can be
// read yet (errno says why), 0 when the peer closed it, else how many were peeked and their kind.
struct Peeked {
  ssize_t bytes = 0;
  FirstBytes first{FirstBytes::Kind::kGarbage, {}, {}};  // set when bytes > 0
};
Peeked PeekFirstBytes(int fd) {
  char bytes[kPeekBytes];
  Peeked peeked;
  peeked.bytes = recv(fd, bytes, sizeof(bytes), MSG_PEEK | MSG_DONTWAIT);
  if (peeked.bytes > 0) {
    peeked.first = ClassifyFirstBytes(std::string_view(bytes, static_cast<size_t>(peeked.bytes)),
                                      peeked.bytes == static_cast<ssize_t>(kPeekBytes));
  }
  return peeked;
}

}  // namespace

StatusOr<std::unique_ptr<FrontDoor>> FrontDoor::Listen(const std::string& address,
                                                       double preface_timeout_seconds, int job_size,
                                                       Logger logger) {
  int port = 0;
  StatusOr<std::vector<UniqueFd>> listeners = ListenOn(address, &port);
  if (!listeners.ok()) return listeners.status();
  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) {
    return Unavailable(std::string("the controller's listener: eventfd: ") + std::strerror(errno));
  }
  return std::unique_ptr<FrontDoor>(new FrontDoor(
      std::move(listeners).value(), port, std::move(wake), preface_timeout_seconds,
      std::max(kMaxPending, static_cast<size_t>(std::max(job_size, 0))), std::move(logger)));
}

FrontDoor::FrontDoor(std::vector<UniqueFd> listeners, int port, UniqueFd wake,
                     double preface_timeout, size_t max_pending, Logger logger)
    : port_(port),
      preface_timeout_(preface_timeout),
      max_pending_(max_pending),
      logger_(std::move(logger)),
      wake_(std::move(wake)),
      refusals_(logger_, "connection to the controller"),
      listeners_(std::move(listeners)) {}

FrontDoor::~FrontDoor() {
  Stop();
}

void FrontDoor::Start(Handoff handoff) {
  handoff_ = std::move(handoff);
  thread_ = std::thread([this] { Run(); });
}

void FrontDoor::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(wake_.get(), &one, sizeof(one)) != sizeof(one)) {
      logger_->error("the controller's listener: cannot wake its thread: {}", std::strerror(errno));
    }
    thread_.join();
  }
  waiting_.clear();  // closes them
  listeners_.clear();
}

std::string FrontDoor::PeerName(const std::string& grpc_peer) const {
  if (grpc_peer.rfind("fd:", 0) != 0) return grpc_peer;
  const int fd = std::atoi(grpc_peer.c_str() + 3);
  MutexLock lock(&peers_mu_);
  auto it = peers_.find(fd);
  return it == peers_.end() ? grpc_peer : it->second;
}

void FrontDoor::Run() {
  std::vector<pollfd> polled;
  for (;;) {
    const Clock::time_point now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    polled.clear();
    polled.push_back({wake_.get(), POLLIN, 0});
    const bool accepting = now >= accept_resume_;
    if (accepting) {
      for (const UniqueFd& listener : listeners_) polled.push_back({listener.get(), POLLIN, 0});
    } else {
      next = accept_resume_;
    }
    const size_t first_waiting = polled.size();
    for (const Waiting& waiting : waiting_) {
      polled.push_back({waiting.fd.get(), POLLIN | POLLRDHUP, 0});
      next = std::min(next, waiting.deadline);
    }
    const int timeout = next == Clock::time_point::max() ? -1 : PollTimeoutMs(now, next);
    if (poll(polled.data(), polled.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      // Out of memory, most likely: the door does not give up; it waits and tries again.
      logger_->error("the controller's listener: poll: {}; retrying", std::strerror(errno));
      pollfd wake{wake_.get(), POLLIN, 0};
      if (poll(&wake, 1, static_cast<int>(kAcceptRetry.count())) > 0) return;  // Stop
      continue;
    }
    if (polled[0].revents != 0) return;  // Stop
    const Clock::time_point after = Clock::now();
    for (size_t i = 0; i < waiting_.size(); ++i) {
      const short events = polled[first_waiting + i].revents;
      if (events != 0) {
        Inspect(waiting_[i], (events & (POLLRDHUP | POLLHUP | POLLERR)) != 0);
      } else if (waiting_[i].deadline <= after) {
        Expire(waiting_[i]);
      }
    }
    waiting_.erase(
        std::remove_if(waiting_.begin(), waiting_.end(), [](const Waiting& w) { return w.done; }),
        waiting_.end());
    if (accepting) {
      for (size_t i = 0; i < listeners_.size(); ++i) {
        if (polled[1 + i].revents != 0) AcceptFrom(listeners_[i].get());
      }
    }
  }
}

void FrontDoor::AcceptFrom(int listener) {
  for (int i = 0; i < kAcceptsPerWake; ++i) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    const int fd = accept4(listener, reinterpret_cast<sockaddr*>(&address), &length,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Admit(UniqueFd(fd), PeerString(address));
      continue;
    }
    const int error = errno;
    if (error == EAGAIN || error == EWOULDBLOCK) return;
    if (error == EINTR || error == ECONNABORTED || error == EPROTO) continue;
    // EMFILE, ENFILE, ENOBUFS, ENOMEM and anything unexpected: wait, then try again. The
    // connection stays in the kernel's backlog meanwhile.
    LogAcceptFailure(error);
    accept_resume_ = Clock::now() + kAcceptRetry;
    return;
  }
}

void FrontDoor::LogAcceptFailure(int error) {
  const Clock::time_point now = Clock::now();
  if (now - accept_failure_logged_ < std::chrono::seconds(1)) {
    ++accept_failures_unlogged_;
    return;
  }
  std::string more;
  if (accept_failures_unlogged_ > 0) {
    more = " (" + std::to_string(accept_failures_unlogged_) + " more failed accepts not logged)";
  }
  logger_->warn(
      "the controller cannot accept connections: {} (open-file limit {}); retrying every {} ms "
      "until descriptors are free{}",
      std::strerror(error), SoftFdLimit(), kAcceptRetry.count(), more);
  accept_failure_logged_ = now;
  accept_failures_unlogged_ = 0;
}

void FrontDoor::Admit(UniqueFd fd, std::string peer) {
  if (waiting_.size() >= max_pending_) {
    // Every entry is still waiting here (AcceptFrom runs after the done ones were removed).
    Waiting& oldest = waiting_.front();
    // A client whose preface has arrived since the last poll (a real worker accepted in the
    // same burst) is handed over rather than dropped.
    Inspect(oldest, false);
    if (!oldest.done) {
      Refuse(oldest, "too-many-pending",
             "dropped: " + std::to_string(max_pending_) +
                 " connections were waiting for their HTTP/2 preface; the oldest goes");
    }
    waiting_.erase(waiting_.begin());
  }
  const int on = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));  // as gRPC's listener
  waiting_.push_back(
      Waiting{std::move(fd), std::move(peer), AddSeconds(Clock::now(), preface_timeout_)});
}

void FrontDoor::Inspect(Waiting& waiting, bool hung_up) {
  const Peeked peeked = PeekFirstBytes(waiting.fd.get());
  const ssize_t n = peeked.bytes;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    // A port check (connect, close) or a reset: nothing to name but the peer.
    logger_->debug("connection to the controller from {} closed before sending anything",
                   waiting.peer);
    waiting.done = true;
    waiting.fd.Reset();
    return;
  }
  const FirstBytes& first = peeked.first;
  switch (first.kind) {
    case FirstBytes::Kind::kPreface:
      HandOff(waiting);
      return;
    case FirstBytes::Kind::kPartialPreface:
      if (hung_up) {
        Refuse(waiting, "partial-preface",
               "closed after " + std::to_string(n) + " bytes of the HTTP/2 preface");
      } else if (!waiting.low_water_set) {
        // Wake this thread again only once the whole preface is there (or at the deadline).
        SetReceiveLowWater(waiting.fd.get(), static_cast<int>(kHttp2Preface.size()));
        waiting.low_water_set = true;
      }
      return;
    default:
      Refuse(waiting, first.key, first.reason);
      return;
  }
}

void FrontDoor::Expire(Waiting& waiting) {
  const Peeked peeked = PeekFirstBytes(waiting.fd.get());
  const ssize_t n = peeked.bytes;
  if (n <= 0) {
    Refuse(waiting, "silent",
           "sent nothing within " + Seconds(preface_timeout_) +
               " (KOLO_TIMEOUT_SECONDS); a gRPC client sends its preface at once");
    return;
  }
  const FirstBytes& first = peeked.first;
  if (first.kind == FirstBytes::Kind::kPreface) {
    HandOff(waiting);  // it arrived as the deadline passed
  } else if (first.kind == FirstBytes::Kind::kPartialPreface) {
    Refuse(waiting, "silent",
           "sent " + std::to_string(n) + " bytes of the HTTP/2 preface, then nothing within " +
               Seconds(preface_timeout_) + " (KOLO_TIMEOUT_SECONDS)");
  } else {
    // A start of the preface, then other bytes too few to wake this thread.
    Refuse(waiting, first.key, first.reason);
  }
}

void FrontDoor::Refuse(Waiting& waiting, const std::string& key, const std::string& reason) {
  refusals_.Refused(key, waiting.peer, reason);
  waiting.fd.Reset();
  waiting.done = true;
}

void FrontDoor::HandOff(Waiting& waiting) {
  if (waiting.low_water_set) SetReceiveLowWater(waiting.fd.get(), 1);
  const int fd = waiting.fd.Release();
  {
    MutexLock lock(&peers_mu_);
    peers_[fd] = waiting.peer;
  }
  waiting.done = true;
  logger_->debug(
      "connection to the controller from {} sent the HTTP/2 preface; handed to gRPC "
      "as fd:{}",
      waiting.peer, fd);
  handoff_(fd);
}

}  // namespace kolo::transport
