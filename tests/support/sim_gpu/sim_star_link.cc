#include "tests/support/sim_gpu/sim_star_link.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <random>

namespace kolo::gpu::sim {
namespace {

constexpr char kIdMagic[] = "kolo-sim-nccl:";  // the id's first bytes
constexpr uint32_t kHelloMagic = 0x6b6f6c6f;   // "kolo"
constexpr uint64_t kMaxMessage = uint64_t{1} << 36;

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t size;
};

std::string ErrnoText(const char* call) {
  return std::string(call) + ": " + std::strerror(errno);
}

long long MsUntil(Clock::time_point deadline) {
  return std::max<long long>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
}

socklen_t Address(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL, then the name (no file, gone with the socket).
  std::memcpy(addr->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

}  // namespace

UniqueId NewSimId() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device random;
  UniqueId id{};
  std::string text = kIdMagic;
  for (int i = 0; i < 32; ++i) text += kHex[random() % 16];
  std::memcpy(id.data(), text.data(), text.size());
  return id;
}

std::string SimIdName(const UniqueId& id) {
  const size_t magic = sizeof(kIdMagic) - 1;
  if (std::memcmp(id.data(), kIdMagic, magic) != 0) return "";
  const char* begin = reinterpret_cast<const char*>(id.data());
  const size_t length = strnlen(begin, id.size());
  return std::string(begin, length);
}

StarLink::StarLink(std::string name, int size, int rank)
    : name_(std::move(name)),
      size_(size),
      rank_(rank),
      abort_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      peers_(static_cast<size_t>(rank == 0 ? size : 1)) {}

StarLink::~StarLink() = default;

void StarLink::Abort() {
  if (aborted_.exchange(true)) return;
  const uint64_t one = 1;
  if (write(abort_fd_.get(), &one, sizeof(one)) < 0) {
    // An eventfd write fails only on overflow, which a single write cannot cause.
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (transport::UniqueFd& fd : peers_) {
    if (fd.valid()) shutdown(fd.get(), SHUT_RDWR);
  }
  if (listener_.valid()) shutdown(listener_.get(), SHUT_RDWR);
}

int StarLink::PeerFd(int peer) const {
  const int index = rank_ == 0 ? peer : 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (index < 0 || index >= static_cast<int>(peers_.size())) return -1;
  return peers_[static_cast<size_t>(index)].get();
}

void StarLink::Adopt(int peer, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  peers_[static_cast<size_t>(rank_ == 0 ? peer : 0)].Reset(fd);
  if (aborted_.load()) shutdown(fd, SHUT_RDWR);  // Abort ran before the fd was here
}

Status StarLink::Wait(int fd, short events, Clock::time_point deadline,
                      const std::string& what) const {
  for (;;) {
    if (aborted_.load()) return Aborted("communicator aborted while " + what);
    pollfd fds[2] = {{fd, events, 0}, {abort_fd_.get(), POLLIN, 0}};
    const long long ms = MsUntil(deadline);
    const int n = poll(fds, 2, static_cast<int>(std::min<long long>(ms, 1000)));
    if (n < 0 && errno != EINTR) return Internal(ErrnoText("poll"));
    if (fds[1].revents != 0) return Aborted("communicator aborted while " + what);
    if (n > 0 && fds[0].revents != 0) return Status::Ok();
    if (ms == 0) return DeadlineExceeded("timed out while " + what);
  }
}

Status StarLink::WriteAll(int fd, const void* data, size_t bytes, Clock::time_point deadline,
                          int peer) const {
  const char* p = static_cast<const char*>(data);
  const std::string what = "sending to rank " + std::to_string(peer);
  while (bytes > 0) {
    const ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      KOLO_RETURN_IF_ERROR(Wait(fd, POLLOUT, deadline, what));
    } else if (aborted_.load()) {
      return Aborted("communicator aborted while " + what);
    } else {
      return Unavailable("rank " + std::to_string(peer) + " closed its connection (" +
                         ErrnoText("send") + ")");
    }
  }
  return Status::Ok();
}

Status StarLink::ReadAll(int fd, void* data, size_t bytes, Clock::time_point deadline,
                         int peer) const {
  char* p = static_cast<char*>(data);
  const std::string what = "waiting for rank " + std::to_string(peer);
  while (bytes > 0) {
    const ssize_t n = recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      KOLO_RETURN_IF_ERROR(Wait(fd, POLLIN, deadline, what));
    } else if (aborted_.load()) {
      return Aborted("communicator aborted while " + what);
    } else {
      return Unavailable("rank " + std::to_string(peer) + " closed its connection" +
                         (n < 0 ? " (" + ErrnoText("recv") + ")" : ""));
    }
  }
  return Status::Ok();
}

Status StarLink::Send(int peer, const std::vector<uint8_t>& bytes, Clock::time_point deadline) {
  const int fd = PeerFd(peer);
  if (fd < 0) return Internal("no connection to rank " + std::to_string(peer));
  const uint64_t length = bytes.size();
  KOLO_RETURN_IF_ERROR(WriteAll(fd, &length, sizeof(length), deadline, peer));
  return WriteAll(fd, bytes.data(), bytes.size(), deadline, peer);
}

StatusOr<std::vector<uint8_t>> StarLink::Recv(int peer, Clock::time_point deadline) {
  const int fd = PeerFd(peer);
  if (fd < 0) return Internal("no connection to rank " + std::to_string(peer));
  uint64_t length = 0;
  KOLO_RETURN_IF_ERROR(ReadAll(fd, &length, sizeof(length), deadline, peer));
  if (length > kMaxMessage) {
    return Internal("rank " + std::to_string(peer) + " sent a message of " +
                    std::to_string(length) + " bytes");
  }
  std::vector<uint8_t> bytes(length);
  KOLO_RETURN_IF_ERROR(ReadAll(fd, bytes.data(), bytes.size(), deadline, peer));
  return bytes;
}

Status StarLink::Join(Clock::time_point deadline) {
  if (size_ == 1) return Status::Ok();
  return rank_ == 0 ? Listen(deadline) : Connect(deadline);
}

Status StarLink::Listen(Clock::time_point deadline) {
  sockaddr_un addr;
  const socklen_t length = Address(name_, &addr);
  transport::UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return Internal(ErrnoText("socket"));
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), length) != 0) {
    if (errno == EADDRINUSE) {
      return Internal("the id's address '" + name_ + "' is in use (an id serves one comm)");
    }
    return Internal(ErrnoText("bind"));
  }
  if (listen(listener.get(), size_) != 0) return Internal(ErrnoText("listen"));
  const int listen_fd = listener.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    listener_ = std::move(listener);
    if (aborted_.load()) shutdown(listen_fd, SHUT_RDWR);
  }
  std::vector<bool> joined(static_cast<size_t>(size_), false);
  joined[0] = true;
  for (int count = 1; count < size_;) {
    Status ready = Wait(listen_fd, POLLIN, deadline, "waiting for the ranks to join");
    if (ready.code() == StatusCode::kDeadlineExceeded) {
      std::string late;
      for (int r = 1; r < size_; ++r) {
        if (!joined[static_cast<size_t>(r)]) late += (late.empty() ? "" : ", ") + std::to_string(r);
      }
      return DeadlineExceeded("rank(s) " + late + " of " + std::to_string(size_) +
                              " did not join in time");
    }
    KOLO_RETURN_IF_ERROR(ready);
    transport::UniqueFd peer(accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!peer.valid()) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
      return Internal(ErrnoText("accept"));
    }
    Hello hello{};
    KOLO_RETURN_IF_ERROR(
        ReadAll(peer.get(), &hello, sizeof(hello), deadline, -1).WithContext("bootstrap"));
    if (hello.magic != kHelloMagic || hello.size != size_ || hello.rank <= 0 ||
        hello.rank >= size_ || joined[static_cast<size_t>(hello.rank)]) {
      return InvalidArgument("a rank joined as rank " + std::to_string(hello.rank) + " of " +
                             std::to_string(hello.size) + "; expected a new rank of " +
                             std::to_string(size_));
    }
    joined[static_cast<size_t>(hello.rank)] = true;
    ++count;
    Adopt(hello.rank, peer.Release());
  }
  for (int r = 1; r < size_; ++r) {
    const uint32_t welcome = kHelloMagic;
    KOLO_RETURN_IF_ERROR(WriteAll(PeerFd(r), &welcome, sizeof(welcome), deadline, r));
  }
  std::lock_guard<std::mutex> lock(mu_);
  listener_.Reset();  // the name is free again
  return Status::Ok();
}

Status StarLink::Connect(Clock::time_point deadline) {
  sockaddr_un addr;
  const socklen_t length = Address(name_, &addr);
  for (;;) {
    transport::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Internal(ErrnoText("socket"));
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), length) == 0) {
      const int raw = fd.get();
      Adopt(0, fd.Release());
      const Hello hello{kHelloMagic, rank_, size_};
      KOLO_RETURN_IF_ERROR(WriteAll(raw, &hello, sizeof(hello), deadline, 0));
      uint32_t welcome = 0;
      Status welcomed = ReadAll(raw, &welcome, sizeof(welcome), deadline, 0);
      if (welcomed.code() == StatusCode::kDeadlineExceeded) {
        return DeadlineExceeded("rank 0 did not see every rank join in time");
      }
      return welcomed;
    }
    if (errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN) {
      return Internal(ErrnoText("connect"));
    }
    // Rank 0 is not listening yet: retry shortly, still woken by Abort.
    if (MsUntil(deadline) == 0) {
      return DeadlineExceeded("rank 0 was not reachable at the id's address in time");
    }
    pollfd abort_poll = {abort_fd_.get(), POLLIN, 0};
    if (poll(&abort_poll, 1, 5) > 0 || aborted_.load()) {
      return Aborted("communicator aborted while connecting to rank 0");
    }
  }
}

}  // namespace kolo::gpu::sim
